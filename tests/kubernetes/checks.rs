//! The checks of tests/kubernetes.rs: every problem of the manifests' wiring,
//! as a list of readable lines (empty when it holds).

use serde_yaml::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The subcommands a manifest may run.
pub const PROCESSES: [&str; 5] = ["migrate", "api", "dispatcher", "worker", "callback-relay"];

/// The placeholder image every Kairos container names: it can never be
/// pulled, and kustomization.yaml's `images:` entry replaces it.
const IMAGE: &str = "registry.invalid/kairos:SET-ME";

/// Seconds a worker pod needs beyond its drain to report what did not
/// finish and go offline.
const DRAIN_MARGIN_S: u64 = 10;

/// What the code and the README say, to hold the manifests against.
pub struct Facts {
    /// Settings in README.md's table.
    pub documented: BTreeSet<String>,
    /// Settings each subcommand reads.
    pub reads: BTreeMap<&'static str, BTreeSet<String>>,
    /// Gauges the worker exports.
    pub worker_gauges: BTreeSet<String>,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

pub fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(text).collect())
        .unwrap_or_default()
}

fn seq(v: &Value) -> &[Value] {
    v.as_sequence().map(Vec::as_slice).unwrap_or_default()
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.as_mapping()
        .map(|m| m.iter().map(|(k, v)| (text(k), text(v))).collect())
        .unwrap_or_default()
}

fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit(':').next()?.parse().ok()
}

/// A workload's containers: the process each runs and its resolved settings.
struct Container<'a> {
    doc: &'a Value,
    spec: &'a Value,
    process: String,
    init: bool,
    /// Setting → literal value (`None` when from a Secret or the pod).
    env: BTreeMap<String, Option<String>>,
}

impl Container<'_> {
    fn setting(&self, name: &str) -> Option<&str> {
        self.env.get(name).and_then(|v| v.as_deref())
    }
}

/// Every problem found; empty when the wiring holds.
pub fn problems(docs: &[(String, Value)], facts: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    let of = |kind: &'static str| {
        docs.iter()
            .filter(move |(_, d)| d["kind"].as_str() == Some(kind))
    };
    let config_maps: BTreeMap<String, BTreeMap<String, String>> = of("ConfigMap")
        .map(|(_, d)| (text(&d["metadata"]["name"]), labels(&d["data"])))
        .collect();
    let secrets: BTreeMap<String, BTreeSet<String>> = of("Secret")
        .map(|(_, d)| {
            let keys = labels(&d["stringData"]).into_keys();
            (
                text(&d["metadata"]["name"]),
                keys.chain(labels(&d["data"]).into_keys()).collect(),
            )
        })
        .collect();

    let mut containers = Vec::new();
    for (file, doc) in of("Deployment").chain(of("Job")) {
        let pod = &doc["spec"]["template"]["spec"];
        let what = format!(
            "{file} {}/{}",
            text(&doc["kind"]),
            text(&doc["metadata"]["name"])
        );
        for (init, spec) in seq(&pod["initContainers"])
            .iter()
            .map(|c| (true, c))
            .chain(seq(&pod["containers"]).iter().map(|c| (false, c)))
        {
            let at = format!("{what} container {}", text(&spec["name"]));
            let image = text(&spec["image"]);
            if image != IMAGE || !spec["command"].is_null() {
                out.push(format!(
                    "{at}: runs {image} with a command, not the kairos image ({IMAGE}) with its entry point"
                ));
            }
            let args = strings(&spec["args"]);
            let process = args.first().cloned().unwrap_or_default();
            if !PROCESSES.contains(&process.as_str()) || args.len() != 1 {
                out.push(format!("{at}: args {args:?} are not one of {PROCESSES:?}"));
                continue;
            }
            let env = environment(spec, &config_maps, &secrets, &at, &mut out);
            for name in env.keys().filter(|n| n.starts_with("KAIROS_")) {
                if !facts.documented.contains(name) {
                    out.push(format!("{at}: {name} is not in README.md's settings table"));
                }
                if !facts.reads[process.as_str()].contains(name) {
                    out.push(format!("{at}: `kairos {process}` does not read {name}"));
                }
            }
            containers.push(Container {
                doc,
                spec,
                process,
                init,
                env,
            });
        }
    }

    for c in containers
        .iter()
        .filter(|c| !c.init && c.process != "migrate")
    {
        out.extend(container_problems(c));
    }
    out.extend(deployment_problems(docs, &containers));
    let migrate_job = containers
        .iter()
        .any(|c| c.process == "migrate" && c.doc["kind"].as_str() == Some("Job"));
    if !migrate_job {
        out.push("no Job runs `kairos migrate`: nothing applies the schema".to_string());
    }
    out.extend(hpa_problems(docs, &containers, facts));
    for setting in ["KAIROS_NAMESPACE", "KAIROS_AMQP_QUEUE_TYPE"] {
        let values: BTreeSet<_> = containers
            .iter()
            .filter(|c| facts.reads[c.process.as_str()].contains(setting))
            .map(|c| c.setting(setting).unwrap_or("(default)"))
            .collect();
        if values.len() > 1 {
            out.push(format!("{setting} differs between processes: {values:?}"));
        }
    }
    out
}

/// A container's settings: `envFrom` and `env`, resolved against the
/// ConfigMaps (values) and Secrets (keys only); dangling references are
/// problems.
fn environment(
    spec: &Value,
    config_maps: &BTreeMap<String, BTreeMap<String, String>>,
    secrets: &BTreeMap<String, BTreeSet<String>>,
    at: &str,
    out: &mut Vec<String>,
) -> BTreeMap<String, Option<String>> {
    let mut env = BTreeMap::new();
    for from in seq(&spec["envFrom"]) {
        if let Some(cm) = from["configMapRef"]["name"].as_str() {
            match config_maps.get(cm) {
                Some(data) => env.extend(data.iter().map(|(k, v)| (k.clone(), Some(v.clone())))),
                None => out.push(format!("{at}: no ConfigMap {cm}")),
            }
        }
        if let Some(s) = from["secretRef"]["name"].as_str() {
            env.extend(
                secrets
                    .get(s)
                    .into_iter()
                    .flatten()
                    .map(|k| (k.clone(), None)),
            );
        }
    }
    for var in seq(&spec["env"]) {
        let (name, from) = (text(&var["name"]), &var["valueFrom"]);
        let value = if let Some(v) = var.get("value") {
            Some(text(v))
        } else if let Some(r) = from.get("configMapKeyRef") {
            let v = config_maps
                .get(&text(&r["name"]))
                .and_then(|m| m.get(&text(&r["key"])));
            if v.is_none() {
                out.push(format!("{at}: {name} refers to a missing ConfigMap key"));
            }
            v.cloned()
        } else if let Some(r) = from.get("secretKeyRef") {
            if !secrets
                .get(&text(&r["name"]))
                .is_some_and(|s| s.contains(&text(&r["key"])))
            {
                out.push(format!("{at}: {name} refers to a missing Secret key"));
            }
            None
        } else {
            None
        };
        env.insert(name, value);
    }
    env
}

/// Probes, ports and the drain of one long-running container.
fn container_problems(c: &Container) -> Vec<String> {
    let mut out = Vec::new();
    let at = format!(
        "{} container {}",
        text(&c.doc["metadata"]["name"]),
        text(&c.spec["name"])
    );
    // Where the process serves /healthz and /readyz, and /metrics.
    let health_var = if c.process == "api" {
        "KAIROS_HTTP_ADDR"
    } else {
        "KAIROS_METRICS_ADDR"
    };
    let Some(health) = c.setting(health_var).and_then(port_of) else {
        return vec![format!("{at}: {health_var} is not set to a HOST:PORT")];
    };
    let metrics = c
        .setting("KAIROS_METRICS_ADDR")
        .and_then(port_of)
        .unwrap_or(health);
    let ports: BTreeMap<String, u16> = seq(&c.spec["ports"])
        .iter()
        .map(|p| {
            (
                text(&p["name"]),
                text(&p["containerPort"]).parse().unwrap_or(0),
            )
        })
        .collect();
    for (probe, path, required) in [
        ("startupProbe", "/healthz", false),
        ("livenessProbe", "/healthz", true),
        ("readinessProbe", "/readyz", true),
    ] {
        let get = &c.spec[probe]["httpGet"];
        if get.is_null() {
            if required {
                out.push(format!("{at}: no {probe} on {path}"));
            }
            continue;
        }
        let port = text(&get["port"]);
        let port = ports.get(&port).copied().or_else(|| port.parse().ok());
        if get["path"].as_str() != Some(path) || port != Some(health) {
            out.push(format!(
                "{at}: {probe} must get {path} on port {health} ({health_var})"
            ));
        }
    }
    let scrape =
        c.doc["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"].as_str();
    if scrape != Some(metrics.to_string().as_str()) || !ports.values().any(|p| *p == metrics) {
        out.push(format!(
            "{at}: /metrics is served on port {metrics}: declare and annotate it"
        ));
    }
    if c.process == "worker" {
        let grace_ms: u64 = c
            .setting("KAIROS_WORKER_GRACE_MS")
            .map_or(30_000, |v| v.parse().unwrap_or(u64::MAX));
        let pod = &c.doc["spec"]["template"]["spec"];
        let period = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
        if period < grace_ms.div_ceil(1000) + DRAIN_MARGIN_S {
            out.push(format!(
                "{at}: terminationGracePeriodSeconds {period} leaves no margin over KAIROS_WORKER_GRACE_MS {grace_ms}"
            ));
        }
        let id = seq(&c.spec["env"])
            .iter()
            .find(|v| v["name"].as_str() == Some("KAIROS_WORKER_ID"));
        if id
            .map(|v| &v["valueFrom"]["fieldRef"]["fieldPath"])
            .and_then(Value::as_str)
            != Some("metadata.name")
        {
            out.push(format!(
                "{at}: KAIROS_WORKER_ID must be the pod name (stable across restarts)"
            ));
        }
    }
    out
}

/// Selectors, replicas, migrations and disruption budgets of Deployments.
fn deployment_problems(docs: &[(String, Value)], containers: &[Container]) -> Vec<String> {
    let mut out = Vec::new();
    let deployments: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"].as_str() == Some("Deployment"))
        .collect();
    let selects = |selector: &BTreeMap<String, String>, d: &Value| {
        let pods = labels(&d["spec"]["template"]["metadata"]["labels"]);
        !selector.is_empty() && selector.iter().all(|(k, v)| pods.get(k) == Some(v))
    };
    for d in &deployments {
        let name = text(&d["metadata"]["name"]);
        if !selects(&labels(&d["spec"]["selector"]["matchLabels"]), d) {
            out.push(format!(
                "Deployment {name}: its selector does not match its pods"
            ));
        }
        let of_d: Vec<&Container> = containers
            .iter()
            .filter(|c| std::ptr::eq(c.doc, *d))
            .collect();
        // A rollout would migrate while the old pods still serve: the
        // schema changes in the migrate Job only.
        if of_d.iter().any(|c| c.process == "migrate") {
            out.push(format!(
                "Deployment {name}: runs `kairos migrate` (as an init container): migrations run as the Job only"
            ));
        }
        let main = of_d.iter().find(|c| !c.init).map(|c| c.process.as_str());
        let own = labels(&d["spec"]["selector"]["matchLabels"]);
        let spread = seq(&d["spec"]["template"]["spec"]["topologySpreadConstraints"])
            .iter()
            .any(|t| labels(&t["labelSelector"]["matchLabels"]) == own);
        let anti = seq(&d["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
            ["preferredDuringSchedulingIgnoredDuringExecution"])
        .iter()
        .any(|t| labels(&t["podAffinityTerm"]["labelSelector"]["matchLabels"]) == own);
        if !spread && !anti {
            out.push(format!(
                "Deployment {name}: its pods are not spread across nodes (topologySpreadConstraints)"
            ));
        }
        if main == Some("dispatcher") && d["spec"]["replicas"].as_u64().unwrap_or(1) < 2 {
            out.push(format!(
                "Deployment {name}: fewer than 2 dispatchers leave no failover"
            ));
        }
        let budgeted = docs
            .iter()
            .filter(|(_, p)| p["kind"].as_str() == Some("PodDisruptionBudget"));
        if !budgeted
            .into_iter()
            .any(|(_, p)| selects(&labels(&p["spec"]["selector"]["matchLabels"]), d))
        {
            out.push(format!("Deployment {name}: no PodDisruptionBudget"));
        }
    }
    for (_, doc) in docs {
        let (kind, name) = (
            doc["kind"].as_str().unwrap_or(""),
            text(&doc["metadata"]["name"]),
        );
        let selector = match kind {
            "PodDisruptionBudget" => labels(&doc["spec"]["selector"]["matchLabels"]),
            "Service" => labels(&doc["spec"]["selector"]),
            _ => continue,
        };
        let Some(d) = deployments.iter().find(|d| selects(&selector, d)) else {
            out.push(format!("{kind} {name}: selects no Deployment's pods"));
            continue;
        };
        let declared: BTreeSet<String> = seq(&d["spec"]["template"]["spec"]["containers"])
            .iter()
            .flat_map(|c| seq(&c["ports"]).iter().map(|p| text(&p["name"])))
            .collect();
        for port in seq(&doc["spec"]["ports"]) {
            if !declared.contains(&text(&port["targetPort"])) {
                out.push(format!(
                    "{kind} {name}: targetPort {:?} is no named container port",
                    port["targetPort"]
                ));
            }
        }
    }
    out
}

/// The worker HPA: its target, bounds and metrics.
fn hpa_problems(docs: &[(String, Value)], containers: &[Container], facts: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    let hpas: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"].as_str() == Some("HorizontalPodAutoscaler"))
        .collect();
    if hpas.is_empty() {
        out.push("no HorizontalPodAutoscaler for the workers".to_string());
    }
    for h in hpas {
        let name = text(&h["metadata"]["name"]);
        let target = &h["spec"]["scaleTargetRef"];
        let worker = containers.iter().find(|c| {
            !c.init
                && c.process == "worker"
                && target["kind"].as_str() == Some("Deployment")
                && c.doc["kind"].as_str() == Some("Deployment")
                && c.doc["metadata"]["name"] == target["name"]
        });
        let Some(worker) = worker else {
            out.push(format!("HPA {name}: does not target the worker Deployment"));
            continue;
        };
        if !worker.doc["spec"]["replicas"].is_null() {
            out.push(format!(
                "HPA {name}: its Deployment sets replicas, which every apply resets"
            ));
        }
        let (min, max) = (
            h["spec"]["minReplicas"].as_u64().unwrap_or(1),
            h["spec"]["maxReplicas"].as_u64().unwrap_or(0),
        );
        if min < 1 || max < min {
            out.push(format!("HPA {name}: bounds {min}..{max}"));
        }
        let capacity: f64 = worker
            .setting("KAIROS_WORKER_CAPACITY")
            .map_or(32.0, |v| v.parse().unwrap_or(0.0));
        for m in seq(&h["spec"]["metrics"]) {
            let metric = text(&m["pods"]["metric"]["name"]);
            if m["type"].as_str() != Some("Pods") || !facts.worker_gauges.contains(&metric) {
                out.push(format!(
                    "HPA {name}: {metric:?} is not a per-pod gauge the worker exports"
                ));
                continue;
            }
            let goal: f64 = text(&m["pods"]["target"]["averageValue"])
                .parse()
                .unwrap_or(f64::MAX);
            if metric == "kairos_worker_running" && goal >= capacity {
                out.push(format!("HPA {name}: a target of {goal} running handlers is never reached below KAIROS_WORKER_CAPACITY {capacity}"));
            }
        }
    }
    out
}
