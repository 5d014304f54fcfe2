//! The figures of one benchmark run: rates and latency percentiles, printed
//! as a table and optionally written as JSON.

use crate::cli::BenchArgs;
use serde::Serialize;
use std::path::Path;

/// Percentiles of one latency series, in milliseconds.
#[derive(Debug, Serialize)]
pub(super) struct Series {
    name: String,
    samples: usize,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// A single figure (a rate, a count, a span).
#[derive(Debug, Serialize)]
pub(super) struct Figure {
    name: String,
    value: f64,
    unit: &'static str,
}

/// Everything one run measured, and what it ran against.
#[derive(Debug, Serialize)]
pub(super) struct Report {
    workload: String,
    target: String,
    jobs: usize,
    connections: usize,
    cpus: usize,
    figures: Vec<Figure>,
    latencies: Vec<Series>,
    notes: Vec<String>,
}

impl Report {
    pub(super) fn new(args: &BenchArgs, target: &str) -> Self {
        Self {
            workload: format!("{:?}", args.workload).to_lowercase(),
            target: target.to_string(),
            jobs: match args.workload {
                crate::cli::BenchWorkload::Cron => args.schedules,
                _ => args.jobs,
            },
            connections: args.connections,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            figures: Vec::new(),
            latencies: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A report that is never printed: for figures of a preparation step
    /// that the run's own report summarises itself.
    pub(super) fn scratch() -> Self {
        Self {
            workload: String::new(),
            target: String::new(),
            jobs: 0,
            connections: 0,
            cpus: 0,
            figures: Vec::new(),
            latencies: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Names what the run measured, once it is known.
    pub(super) fn retarget(&mut self, target: &str) {
        self.target = target.to_string();
    }

    pub(super) fn figure(&mut self, name: &str, value: f64, unit: &'static str) {
        self.figures.push(Figure {
            name: name.to_string(),
            value,
            unit,
        });
    }

    /// Adds the percentiles of `samples` (ms); an empty series is noted.
    pub(super) fn latency(&mut self, name: &str, mut samples: Vec<f64>) {
        if samples.is_empty() {
            self.note(format!("{name}: no samples"));
            return;
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        self.latencies.push(Series {
            name: name.to_string(),
            samples: samples.len(),
            p50_ms: at(0.50),
            p90_ms: at(0.90),
            p99_ms: at(0.99),
            max_ms: samples[samples.len() - 1],
        });
    }

    pub(super) fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    pub(super) fn print(&self) {
        println!();
        println!(
            "kairos bench {} — {} ({} connections, {} CPUs here)",
            self.workload, self.target, self.connections, self.cpus
        );
        for f in &self.figures {
            println!("  {:<40} {:>12.1} {}", f.name, f.value, f.unit);
        }
        if !self.latencies.is_empty() {
            println!(
                "  {:<40} {:>7} {:>9} {:>9} {:>9} {:>9}",
                "latency (ms)", "n", "p50", "p90", "p99", "max"
            );
            for s in &self.latencies {
                println!(
                    "  {:<40} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                    s.name, s.samples, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms
                );
            }
        }
        for n in &self.notes {
            println!("  note: {n}");
        }
    }

    pub(super) fn write_json(&self, path: &Path) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(path, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{BenchWorkload, Cli, Command};
    use clap::Parser;

    fn args() -> BenchArgs {
        match Cli::parse_from(["kairos", "bench", "burst", "-n", "10"]).command {
            Command::Bench(a) => a,
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn percentiles_are_read_from_the_sorted_samples() {
        let mut r = Report::new(&args(), "t");
        r.latency("x", (1..=100).rev().map(f64::from).collect());
        let s = &r.latencies[0];
        assert_eq!(
            (s.samples, s.p50_ms, s.p99_ms, s.max_ms),
            (100, 51.0, 99.0, 100.0)
        );
        assert_eq!(r.workload, "burst");
        assert_eq!(args().workload, BenchWorkload::Burst);
    }

    #[test]
    fn an_empty_series_is_a_note_not_a_row() {
        let mut r = Report::new(&args(), "t");
        r.latency("nothing", Vec::new());
        assert!(r.latencies.is_empty());
        assert_eq!(r.notes, vec!["nothing: no samples".to_string()]);
    }
}
