//! In-process adapters for `kairos dev` and tests: a broker, the coordination
//! port (lease, once-guard, stop board) and due signals, each with the
//! semantics of its networked twin (RabbitMQ, Redis) and nothing kept on disk.
#![warn(missing_docs, unreachable_pub)]

mod broker;
mod coord;
mod due;

pub use broker::MemoryBroker;
pub use coord::MemoryCoord;
pub use due::MemoryDue;
