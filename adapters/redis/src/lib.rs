//! Redis adapters: the coordination port (leader lease with fencing,
//! once-per-attempt guard, stop board) and due signals over pub/sub.
#![warn(missing_docs, unreachable_pub)]

mod coord;
mod due;

pub use coord::RedisCoord;
pub use due::RedisDue;
