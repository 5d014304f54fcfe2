//! Issue 44, "safe by construction", over the API's own router and a real
//! store: a NUL in an address is a clean 400 page on every database (never
//! PostgreSQL's 500), an id from the address reaches no other route,
//! notices come from a fixed set and errors only with the session's
//! signature (a link cannot make the dashboard say anything), a bulk
//! confirmation acts on exactly what it showed, forms keep what was typed
//! after a refusal, and every POST route refuses a read key and a missing
//! CSRF token.

mod actions;
mod forms;
mod input;
mod support;
