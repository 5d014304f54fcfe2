//! The `kairos` library: what the binary's subcommands share and what an
//! embedding Rust program may reuse — turning configuration URLs into
//! adapters ([`connect`]), signal handling ([`signal`]), the metrics and
//! health endpoint ([`ops`]), and the whole system in one process
//! ([`embedded`], what `kairos dev` runs, with its admin key: [`dev_key`]),
//! and the HTTP app — API plus `/ui` dashboard — both serve ([`web`]).
#![warn(missing_docs, unreachable_pub)]

pub mod connect;
pub mod dev_key;
pub mod embedded;
pub mod ops;
pub mod signal;
pub mod web;
