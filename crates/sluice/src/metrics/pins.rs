//! The tool pinning metrics: changes quarantined per upstream, and tools quarantined now.
//!
//! Takes each change as it is told and each upstream's count after a judgement or an accept;
//! gives `sluice_tool_pin_changes_total{upstream}` and `sluice_tools_quarantined{upstream}`.
//! Refuses nothing; labels are configured upstream names (a closed set).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::NameLabels;

/// The pinning metrics.
pub struct PinMetrics {
    changes: Family<NameLabels, Counter>,
    quarantined: Family<NameLabels, Gauge>,
}

impl PinMetrics {
    /// Registers them.
    pub(super) fn register(r: &mut Registry) -> PinMetrics {
        PinMetrics {
            changes: super::registered(
                r,
                "sluice_tool_pin_changes",
                "Per upstream: tool definitions found changed from their pin (or new, under strict) and quarantined",
            ),
            quarantined: super::registered(
                r,
                "sluice_tools_quarantined",
                "Per upstream: tools quarantined now, waiting for an operator's accept",
            ),
        }
    }

    /// Counts one change at `upstream`.
    pub fn changed(&self, upstream: &str) {
        self.changes.get_or_create(&label(upstream)).inc();
    }

    /// Sets how many tools of `upstream` are quarantined now.
    pub fn quarantined(&self, upstream: &str, n: usize) {
        self.quarantined
            .get_or_create(&label(upstream))
            .set(n as i64);
    }
}

fn label(upstream: &str) -> NameLabels {
    NameLabels {
        upstream: upstream.to_owned(),
    }
}
