//! A TCP forwarder the test can switch off: while it is down it cuts every
//! forwarded connection and hangs up on new ones, so the processes behind it
//! see their service as unreachable without the shared service stopping.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A running forwarder from a local port to `target`.
pub struct Proxy {
    /// The port to connect to instead of the service's.
    pub port: u16,
    up: Arc<AtomicBool>,
    /// Cancelled to cut the connections forwarded so far.
    cut: Arc<Mutex<CancellationToken>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Starts forwarding `127.0.0.1:<port>` to `target` (`host:port`).
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("local address").port();
        let up = Arc::new(AtomicBool::new(true));
        let cut = Arc::new(Mutex::new(CancellationToken::new()));
        let accept = tokio::spawn(accept_loop(listener, target, up.clone(), cut.clone()));
        Proxy {
            port,
            up,
            cut,
            accept,
        }
    }

    /// Cuts every forwarded connection and refuses new ones until [`Proxy::up`].
    pub fn down(&self) {
        self.up.store(false, Ordering::SeqCst);
        let mut cut = self.cut.lock().unwrap_or_else(PoisonError::into_inner);
        cut.cancel();
        *cut = CancellationToken::new();
    }

    /// Forwards again.
    pub fn up(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cancel();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: String,
    up: Arc<AtomicBool>,
    cut: Arc<Mutex<CancellationToken>>,
) {
    loop {
        let Ok((mut client, _)) = listener.accept().await else {
            continue;
        };
        if !up.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        let token = cut.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let target = target.clone();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(&target).await else {
                return;
            };
            tokio::select! {
                _ = token.cancelled() => {}
                _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
            }
        });
    }
}
