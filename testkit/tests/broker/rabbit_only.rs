//! RabbitMQ-only cases: connection failures, vhosts, and a connection the
//! broker closes under a running adapter.

use super::support::{Fx, WAIT, decode, dispatch, next};
use futures::StreamExt;
use kairos_broker_rabbitmq::AmqpBroker;
use kairos_core::broker::BrokerError;
use kairos_core::protocol::Names;
use kairos_testkit as testkit;

const RABBITMQCTL: &str = "/usr/sbin/rabbitmqctl";

#[tokio::test]
async fn unreachable_broker_is_unavailable_with_masked_url() {
    let url = "amqp://guest:s3cret@127.0.0.1:1/%2f";
    let err = AmqpBroker::connect(url, Names::new(testkit::unique("t")))
        .await
        .expect_err("nothing listens on port 1");
    let BrokerError::Unavailable(text) = err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test]
async fn the_url_vhost_is_honoured() {
    let Some(url) = testkit::amqp_available().await else {
        return;
    };
    let Some(base) = url.rsplit_once('/').map(|(b, _)| b) else {
        panic!("AMQP URL without a vhost: {url}");
    };
    let missing = format!("{base}/{}", testkit::unique("no_such_vhost"));
    let err = AmqpBroker::connect(&missing, Names::new(testkit::unique("t"))).await;
    assert!(matches!(err, Err(BrokerError::Unavailable(_))), "{err:?}");
}

/// The pid of the connection whose client properties carry `name`
/// (`rabbitmqctl close_connection` wants the pid in its text form).
fn connection_pid(name: &str) -> Option<String> {
    let out = std::process::Command::new(RABBITMQCTL)
        .args([
            "list_connections",
            "pid",
            "client_properties",
            "-q",
            "--no-table-headers",
        ])
        .output()
        .expect("run rabbitmqctl");
    assert!(out.status.success(), "rabbitmqctl: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|line| line.contains(name))
        .and_then(|line| line.split('\t').next())
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_closed_by_the_broker_recovers() {
    let Some(fx) = Fx::rabbit().await else {
        return;
    };
    if !std::path::Path::new(RABBITMQCTL).exists() {
        testkit::service_missing::<()>("rabbitmqctl", RABBITMQCTL, "not installed");
        return;
    }
    let w = fx.worker("w").await;
    let mut stream = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    let pid = connection_pid(fx.names.namespace()).expect("our named connection");
    let closed = std::process::Command::new(RABBITMQCTL)
        .args(["close_connection", &pid, "kairos broker test"])
        .output()
        .expect("run rabbitmqctl");
    assert!(closed.status.success(), "{closed:?}");

    let end = tokio::time::timeout(WAIT, stream.next()).await;
    assert!(matches!(end, Ok(None)), "the consumer stream ends");

    // Calls fail fast with Unavailable until the next one reconnects.
    let published = testkit::wait_for("a publish after the close", WAIT, || async {
        match fx.broker.dispatch_publish(&w, &dispatch(9)).await {
            Ok(()) => Some(()),
            Err(BrokerError::Unavailable(_)) => None,
            Err(e) => panic!("unexpected error: {e}"),
        }
    });
    published.await;
    assert!(fx.broker.is_healthy().await);

    let mut again = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    let d = next(&mut again).await;
    assert_eq!(decode(&d), dispatch(9));
    d.acker.ack().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_deleted_under_the_broker_is_redeclared() {
    let Some(fx) = Fx::rabbit().await else {
        return;
    };
    let Some(url) = testkit::amqp_available().await else {
        return;
    };
    let w = fx.worker("w").await;
    fx.broker.dispatch_publish(&w, &dispatch(1)).await.unwrap();
    let other = AmqpBroker::connect(&url, fx.names.clone()).await.unwrap();
    other.topology_delete().await.unwrap();

    // The binding went with the exchange: publishes are refused (never lost)
    // until the worker declares its queue again, which rebinds it.
    let first = fx.broker.dispatch_publish(&w, &dispatch(2)).await;
    assert!(matches!(first, Err(BrokerError::Refused(_))), "{first:?}");
    testkit::wait_for("a publish after redeclaring", WAIT, || async {
        fx.broker.worker_queue_declare(&w).await.ok()?;
        fx.broker.dispatch_publish(&w, &dispatch(3)).await.ok()
    })
    .await;
    let mut s = fx.broker.dispatch_consume(&w, 10).await.unwrap();
    assert_eq!(decode(&next(&mut s).await), dispatch(1));
    assert_eq!(decode(&next(&mut s).await), dispatch(3));
}

/// A worker queue an older version declared with ten priority levels (or
/// none) is used as it is: declaring it again succeeds and it delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_queue_declared_by_an_older_version_is_kept() {
    use kairos_core::broker::Broker;
    use lapin::options::QueueDeclareOptions;
    use lapin::types::{AMQPValue, FieldTable};
    let Some(url) = testkit::amqp_available().await else {
        return;
    };
    let names = Names::new(testkit::unique("t"));
    let conn = lapin::Connection::connect(&url, lapin::ConnectionProperties::default())
        .await
        .expect("connect");
    let ch = conn.create_channel().await.expect("channel");
    let mut shapes = Vec::new();
    for (tag, levels) in [("ten", Some(9u8)), ("none", None)] {
        let id = format!("{tag}-{}", names.namespace());
        let mut args = FieldTable::default();
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString(names.reroute_exchange().into()),
        );
        if let Some(levels) = levels {
            args.insert("x-max-priority".into(), AMQPValue::ShortShortUInt(levels));
        }
        ch.queue_declare(
            names.worker_queue(&id).as_str().into(),
            QueueDeclareOptions::durable(),
            args,
        )
        .await
        .expect("declare as an older version did");
        shapes.push(id);
    }
    let broker = AmqpBroker::connect(&url, names.clone())
        .await
        .expect("connect the adapter");
    for id in &shapes {
        broker
            .worker_queue_declare(id)
            .await
            .expect("an existing queue is taken as it is");
        broker
            .dispatch_publish(id, &dispatch(1))
            .await
            .expect("publish");
        let mut s = broker.dispatch_consume(id, 1).await.expect("consume");
        let d = next(&mut s).await;
        assert_eq!(decode(&d).execution_id, "exec-1");
        d.acker.ack().await.expect("ack");
        drop(s);
        let _ = broker.worker_queue_delete(id).await;
    }
    let _ = broker.topology_delete().await;
}
