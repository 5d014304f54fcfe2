//! The compose file's wiring, proven without a Docker engine: every Kairos
//! service of `docker-compose.yml` runs natively with its own command and
//! environment (compose hostnames `mariadb`, `redis` and `rabbitmq` mapped to
//! the local services, a fresh database, a unique namespace, each container
//! port mapped to a free local one), its health check URL must answer, and
//! together they must run a job end to end.
//!
//! `docker-compose config` (run by `.ci/run`) validates the file's syntax;
//! this test validates what it says.

use kairos_testkit as testkit;
use serde_yaml::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The Kairos services the compose file must run, besides `migrate`.
const KAIROS_SERVICES: [&str; 6] = [
    "api",
    "dispatcher-1",
    "dispatcher-2",
    "worker-1",
    "worker-2",
    "relay",
];

fn compose() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docker-compose.yml");
    let text = std::fs::read_to_string(&path).expect("read docker-compose.yml");
    let mut doc: Value = serde_yaml::from_str(&text).expect("docker-compose.yml is YAML");
    doc.apply_merge().expect("merge keys resolve");
    doc
}

fn service<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["services"][name];
    assert!(s.is_mapping(), "the compose file has no service {name}");
    s
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .unwrap_or_else(|| panic!("not a list: {v:?}"))
        .iter()
        .map(text)
        .collect()
}

fn environment(s: &Value) -> BTreeMap<String, String> {
    s["environment"]
        .as_mapping()
        .map(|m| m.iter().map(|(k, v)| (text(k), text(v))).collect())
        .unwrap_or_default()
}

fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .host_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn compose_file_describes_the_whole_system() {
    let doc = compose();
    for infra in ["mariadb", "redis", "rabbitmq"] {
        assert!(
            service(&doc, infra)["healthcheck"].is_mapping(),
            "{infra} has a health check"
        );
    }
    let rabbit_ports = strings(&service(&doc, "rabbitmq")["ports"]);
    assert!(
        rabbit_ports.iter().any(|p| p.ends_with(":15672")),
        "management UI published: {rabbit_ports:?}"
    );
    assert!(
        text(&service(&doc, "rabbitmq")["image"]).contains("management"),
        "the management image"
    );
    let migrate = service(&doc, "migrate");
    assert_eq!(strings(&migrate["command"]), ["migrate"]);
    assert_eq!(
        text(&migrate["depends_on"]["mariadb"]["condition"]),
        "service_healthy"
    );
    for name in KAIROS_SERVICES {
        let s = service(&doc, name);
        assert_eq!(text(&s["image"]), "kairos:latest", "{name}");
        assert!(
            s["healthcheck"]["test"].is_sequence(),
            "{name} has a health check"
        );
        assert_eq!(
            text(&s["depends_on"]["migrate"]["condition"]),
            "service_completed_successfully",
            "{name} starts after the migration"
        );
    }
    for (name, var, host) in [
        ("dispatcher-1", "KAIROS_DATABASE_URL", "mariadb"),
        ("dispatcher-1", "KAIROS_REDIS_URL", "redis"),
        ("dispatcher-1", "KAIROS_AMQP_URL", "rabbitmq"),
    ] {
        let env = environment(service(&doc, name));
        assert_eq!(host_of(&env[var]), host, "{name} {var}");
    }
    for profile_only in ["prometheus", "grafana"] {
        assert_eq!(
            strings(&service(&doc, profile_only)["profiles"]),
            ["monitoring"]
        );
    }
}

/// Processes killed when the test ends, pass or fail.
struct Processes {
    children: Vec<Child>,
    logs: PathBuf,
}

impl Drop for Processes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        eprintln!("compose service logs in {}", self.logs.display());
    }
}

/// One compose service as a native process: its command, its environment
/// with hosts and ports mapped, and its health check URL mapped the same way.
struct Native {
    name: String,
    command: Vec<String>,
    env: BTreeMap<String, String>,
    health_url: Option<String>,
}

/// Maps a compose service to a native process on this machine.
fn native(doc: &Value, name: &str, local: &HashMap<&str, String>) -> Native {
    let s = service(doc, name);
    let mut ports: HashMap<String, u16> = HashMap::new();
    let mut env = environment(s);
    for (key, value) in env.iter_mut() {
        match key.as_str() {
            // Compose hostnames become the local services; the database is a
            // fresh one and the namespace unique, so the test runs beside others.
            "KAIROS_DATABASE_URL" | "KAIROS_REDIS_URL" | "KAIROS_AMQP_URL" => {
                let host = host_of(value);
                *value = local
                    .get(host.as_str())
                    .unwrap_or_else(|| panic!("{name} {key} names an unknown host {host}"))
                    .clone();
            }
            "KAIROS_NAMESPACE" => *value = local["namespace"].clone(),
            _ if key.ends_with("_ADDR") => {
                let (_, port) = value.rsplit_once(':').expect("HOST:PORT");
                let mapped = testkit::free_port();
                ports.insert(port.to_string(), mapped);
                *value = format!("127.0.0.1:{mapped}");
            }
            _ => {}
        }
    }
    let health_url = s["healthcheck"]["test"].as_sequence().map(|_| {
        let test = strings(&s["healthcheck"]["test"]);
        let url = test
            .iter()
            .find(|a| a.starts_with("http://"))
            .unwrap_or_else(|| panic!("{name}'s health check calls a URL: {test:?}"))
            .clone();
        let mut u = url::Url::parse(&url).unwrap();
        let port = u
            .port()
            .expect("a port in the health check URL")
            .to_string();
        let mapped = ports.get(&port).unwrap_or_else(|| {
            panic!("{name}'s health check port {port} is not one it listens on")
        });
        u.set_port(Some(*mapped)).unwrap();
        u.to_string()
    });
    Native {
        name: name.to_string(),
        command: strings(&s["command"]),
        env,
        health_url,
    }
}

fn start(p: &Native, logs: &std::path::Path) -> Child {
    let log = std::fs::File::create(logs.join(format!("{}.log", p.name))).unwrap();
    Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args(&p.command)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(&p.env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", p.name))
}

#[tokio::test(flavor = "multi_thread")]
async fn services_compose_services_run_natively_as_a_cluster() {
    let Some(db) = testkit::mysql_fresh_database().await else {
        return;
    };
    let Some(redis) = testkit::redis_available().await else {
        return;
    };
    let Some(amqp) = testkit::amqp_available().await else {
        return;
    };
    let local: HashMap<&str, String> = HashMap::from([
        ("mariadb", db),
        ("redis", redis),
        ("rabbitmq", amqp),
        ("namespace", testkit::unique("compose")),
    ]);
    let doc = compose();
    let logs = std::env::temp_dir().join(testkit::unique("kairos_compose"));
    std::fs::create_dir_all(&logs).unwrap();
    let mut procs = Processes {
        children: Vec::new(),
        logs: logs.clone(),
    };

    let migrate = native(&doc, "migrate", &local);
    let status = start(&migrate, &logs).wait().unwrap();
    assert!(status.success(), "migrate failed; see {}", logs.display());

    let services: Vec<Native> = KAIROS_SERVICES
        .iter()
        .map(|n| native(&doc, n, &local))
        .collect();
    for p in &services {
        procs.children.push(start(p, &logs));
    }
    // The API needs a key: an operator makes one with the CLI against the
    // database the stack uses (the migrate service's environment has it).
    let key = Command::new(env!("CARGO_BIN_EXE_kairos"))
        .args([
            "keys", "create", "--tenant", "default", "--role", "operator",
        ])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(&migrate.env)
        .output()
        .expect("run kairos keys create");
    assert!(key.status.success(), "kairos keys create failed: {key:?}");
    let key = String::from_utf8(key.stdout).expect("the key is text");
    let mut auth = reqwest::header::HeaderMap::new();
    auth.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {}", key.trim())
            .parse()
            .expect("a header value"),
    );
    let http = reqwest::Client::builder()
        .default_headers(auth)
        .build()
        .expect("HTTP client");
    for p in &services {
        let url = p.health_url.clone().expect("a health check");
        let what = format!("{}'s health check {url}", p.name);
        testkit::wait_for(&what, Duration::from_secs(60), || async {
            let r = http.get(&url).send().await.ok()?;
            r.status().is_success().then_some(())
        })
        .await;
    }

    let api = services.iter().find(|p| p.name == "api").unwrap();
    let base = format!("http://{}", api.env["KAIROS_HTTP_ADDR"]);
    testkit::wait_for(
        "both compose workers online",
        Duration::from_secs(60),
        || async {
            let body: serde_json::Value = http
                .get(format!("{base}/openapi/workers"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let online: Vec<&str> = body["items"]
                .as_array()?
                .iter()
                .filter(|w| w["state"] == "online")
                .filter_map(|w| w["workerId"].as_str().or(w["id"].as_str()))
                .collect();
            (online.contains(&"worker-1") && online.contains(&"worker-2")).then_some(())
        },
    )
    .await;
    let created: serde_json::Value = http
        .post(format!("{base}/openapi/jobs"))
        .json(&serde_json::json!({"jobName": "compose", "jobHandler": "noop"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let job = created["jobId"].as_str().expect("jobId").to_string();
    testkit::wait_for("the job to succeed", Duration::from_secs(60), || async {
        let body: serde_json::Value = http
            .get(format!("{base}/openapi/jobs/{job}"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (body["status"] == "succeeded").then_some(())
    })
    .await;

    // Exactly one of the two dispatchers leads.
    let mut leaders = 0.0;
    for p in services.iter().filter(|p| p.name.starts_with("dispatcher")) {
        let url = format!("http://{}/metrics", p.env["KAIROS_METRICS_ADDR"]);
        let text = http.get(&url).send().await.unwrap().text().await.unwrap();
        leaders += text
            .lines()
            .find_map(|l| l.strip_prefix("kairos_dispatcher_is_leader "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0);
    }
    assert_eq!(leaders, 1.0, "one leader among the compose dispatchers");
    drop(procs);
}
