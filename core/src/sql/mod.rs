//! (adapter under construction)
