//! What one trigger may set off (issue 44): the execution budget of a
//! follow-up chain and of a workflow run, and how many bytes of parent
//! outputs a run may copy into its nodes' executions. A deployment setting
//! (`KAIROS_RUN_MAX_EXECUTIONS`, `KAIROS_NODE_PARENT_OUTPUTS_MAX_BYTES`,
//! `KAIROS_RUN_PARENT_OUTPUTS_MAX_BYTES`), applied by the transaction that
//! creates the next executions, so no trigger can make unbounded work or
//! storage however its graph is drawn.

/// Default of [`RunLimits::max_executions`].
pub const DEFAULT_MAX_EXECUTIONS: u64 = 1_000;
/// Default of [`RunLimits::node_parent_outputs_bytes`]: 1 MiB.
pub const DEFAULT_NODE_PARENT_OUTPUTS_BYTES: u64 = 1 << 20;
/// Default of [`RunLimits::run_parent_outputs_bytes`]: 16 MiB.
pub const DEFAULT_RUN_PARENT_OUTPUTS_BYTES: u64 = 16 << 20;

/// The budgets every chain and run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Most executions one follow-up chain (the trigger's own execution
    /// included) or one workflow run may make.
    pub max_executions: u64,
    /// Most bytes of parent outputs (as JSON) one node's execution carries.
    pub node_parent_outputs_bytes: u64,
    /// Most bytes of parent outputs one run stores across its executions.
    pub run_parent_outputs_bytes: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_executions: DEFAULT_MAX_EXECUTIONS,
            node_parent_outputs_bytes: DEFAULT_NODE_PARENT_OUTPUTS_BYTES,
            run_parent_outputs_bytes: DEFAULT_RUN_PARENT_OUTPUTS_BYTES,
        }
    }
}

/// Why a node that became due was not run: its execution is recorded
/// `failed` at once with [`Refusal::message`] as its error, and the run
/// moves on as for any failed node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The run has made its budget of executions.
    Budget {
        /// The budget.
        max: u64,
    },
    /// The node's parents' outputs are larger than one node may carry.
    NodeOutputs {
        /// Their size as JSON.
        bytes: u64,
        /// What one node may carry.
        max: u64,
    },
    /// Storing them would take the run past its parent-outputs budget.
    RunOutputs {
        /// Their size as JSON.
        bytes: u64,
        /// What the run's executions hold already.
        stored: u64,
        /// What one run may store.
        max: u64,
    },
}

impl Refusal {
    /// The error text the node's execution records.
    pub fn message(&self) -> String {
        match self {
            Refusal::Budget { max } => format!(
                "not run: the run has made its budget of {max} executions \
                 (KAIROS_RUN_MAX_EXECUTIONS)"
            ),
            Refusal::NodeOutputs { bytes, max } => format!(
                "not run: its parents' outputs are {bytes} bytes, more than the \
                 {max} bytes a node may receive (KAIROS_NODE_PARENT_OUTPUTS_MAX_BYTES)"
            ),
            Refusal::RunOutputs { bytes, stored, max } => format!(
                "not run: its parents' outputs ({bytes} bytes) would take the run's stored \
                 parent outputs from {stored} past {max} bytes \
                 (KAIROS_RUN_PARENT_OUTPUTS_MAX_BYTES)"
            ),
        }
    }
}

impl RunLimits {
    /// Whether a run that has made `started` executions and stored
    /// `stored` bytes of parent outputs may run a node whose parents'
    /// outputs are `bytes` long (0 for a root).
    pub fn admit_node(&self, started: u64, stored: u64, bytes: u64) -> Result<(), Refusal> {
        if started >= self.max_executions {
            return Err(Refusal::Budget {
                max: self.max_executions,
            });
        }
        if bytes > self.node_parent_outputs_bytes {
            return Err(Refusal::NodeOutputs {
                bytes,
                max: self.node_parent_outputs_bytes,
            });
        }
        if stored.saturating_add(bytes) > self.run_parent_outputs_bytes {
            return Err(Refusal::RunOutputs {
                bytes,
                stored,
                max: self.run_parent_outputs_bytes,
            });
        }
        Ok(())
    }

    /// Whether a follow-up chain that has made `made` executions may make
    /// one more.
    pub fn chain_may_run(&self, made: u64) -> bool {
        made < self.max_executions
    }

    /// The error text of a follow-up a spent chain did not trigger.
    pub fn chain_spent_message(&self, chain: &str) -> String {
        format!(
            "not triggered: its follow-up chain (started by execution {chain}) has made its \
             budget of {} executions (KAIROS_RUN_MAX_EXECUTIONS)",
            self.max_executions
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: RunLimits = RunLimits {
        max_executions: 3,
        node_parent_outputs_bytes: 100,
        run_parent_outputs_bytes: 250,
    };

    #[test]
    fn a_node_runs_within_every_budget() {
        assert_eq!(L.admit_node(0, 0, 0), Ok(()));
        assert_eq!(L.admit_node(2, 150, 100), Ok(()));
    }

    #[test]
    fn each_budget_refuses_with_its_numbers() {
        assert_eq!(L.admit_node(3, 0, 0), Err(Refusal::Budget { max: 3 }));
        assert_eq!(
            L.admit_node(0, 0, 101),
            Err(Refusal::NodeOutputs {
                bytes: 101,
                max: 100
            })
        );
        let run = L.admit_node(1, 200, 51).unwrap_err();
        assert_eq!(
            run,
            Refusal::RunOutputs {
                bytes: 51,
                stored: 200,
                max: 250
            }
        );
        assert!(run.message().contains("250 bytes"), "{}", run.message());
    }

    #[test]
    fn a_chain_stops_at_its_budget() {
        assert!(L.chain_may_run(2));
        assert!(!L.chain_may_run(3));
        assert!(L.chain_spent_message("e1").contains("budget of 3"));
    }
}
