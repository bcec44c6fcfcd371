//! `/metrics` in Prometheus text format.
//!
//! Takes each finished request's audit record (the one place that sees every outcome) and the
//! gateway's gauges; gives counters and latency histograms named after the OpenTelemetry MCP
//! semantic conventions where they exist (`mcp.server.operation.duration` as
//! `mcp_server_operation_duration_seconds`, labels `mcp_method_name`, `error_type`), and
//! Sluice's own (`sluice_*`). Refuses nothing.

use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

pub mod pins;

use crate::audit::record::Record;

mod labels;
use labels::{code_label, method_label, status_label};
#[cfg(test)]
use labels::{CODES, STATUSES};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    mcp_method_name: &'static str,
    upstream: String,
    /// `ok`, or the JSON-RPC error code / HTTP status class.
    error_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: std::borrow::Cow<'static, str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabels {
    upstream: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HealthLabels {
    upstream: String,
    /// `down` or `up`.
    to: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
    event: &'static str,
}

/// All metrics.
pub struct Metrics {
    registry: Registry,
    duration: Family<OpLabels, Histogram>,
    requests: Family<OpLabels, Counter>,
    rounds: Counter,
    refusals: Family<KindLabels, Counter>,
    upstream_errors: Family<KindLabels, Counter>,
    /// Parked exchanges right now (set when scraped).
    pub parked: Gauge,
    /// Legacy upstream sessions right now (set when scraped).
    pub sessions: Gauge,
    /// Audit records dropped (set when scraped).
    pub audit_dropped: Gauge,
    /// MCP requests in progress (until their response head).
    in_flight: Gauge,
    /// Per upstream: endpoints ejected and readmitted, requests shed, failed fast, retried.
    upstream_events: Family<UpstreamLabels, Counter>,
    /// Per upstream: endpoints whose breaker is open or on trial now.
    endpoints_out: Family<NameLabels, Gauge>,
    /// Per upstream: changes of its health told (to `down`, to `up`).
    health_changes: Family<HealthLabels, Counter>,
    /// Per upstream: 1 when healthy now, else 0.
    healthy: Family<NameLabels, Gauge>,
    /// Config reloads by result (`applied`, `failed`).
    reloads: Family<ResultLabels, Counter>,
    /// 1 when the last reload was applied (or none was tried), 0 after a failed one.
    reload_ok: Gauge,
    /// The config generation serving: 1 at start, one more per applied reload.
    generation: Gauge,
    /// Spans exported and lost with a failed batch (`[telemetry]`; brought up to date when scraped).
    trace_spans: Family<ResultLabels, Counter>,
    /// `[cluster]`: Redis failures, decisions on local state, forwards (brought up to date when scraped).
    cluster: Family<ResultLabels, Counter>,
    /// Calls held for an operator, by what became of them.
    approvals: Family<ResultLabels, Counter>,
    scraping: std::sync::Mutex<()>,
    /// Tool pinning: changes quarantined, tools quarantined now.
    pub pins: pins::PinMetrics,
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let r = &mut registry;
        let duration = Family::<OpLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 18))
        });
        r.register(
            "mcp_server_operation_duration_seconds",
            "Duration of MCP requests served by Sluice",
            duration.clone(),
        );
        let requests: Family<OpLabels, Counter> = registered(
            r,
            "sluice_requests",
            "MCP requests by method, upstream and outcome",
        );
        let rounds: Counter = registered(
            r,
            "sluice_input_rounds",
            "input_required rounds answered to clients",
        );
        let refusals: Family<KindLabels, Counter> = registered(
            r,
            "sluice_refusals",
            "Requests refused by governance or authentication, by code",
        );
        let upstream_errors: Family<KindLabels, Counter> = registered(
            r,
            "sluice_upstream_errors",
            "Requests failed by an upstream (502/504), by upstream",
        );
        let (parked, sessions, audit_dropped, in_flight) = register_gauges(r);
        let (upstream_events, endpoints_out) = register_resilience(r);
        let (health_changes, healthy) = register_health(r);
        let (reloads, reload_ok, generation) = register_reloads(r);
        let pins = pins::PinMetrics::register(r);
        let trace_spans: Family<ResultLabels, Counter> = registered(
            r,
            "sluice_trace_spans",
            "Spans sent to the OTLP endpoint by result: exported, failed (their batch failed); 0 without [telemetry]",
        );
        let cluster: Family<ResultLabels, Counter> = registered(
            r,
            "sluice_cluster_events",
            "[cluster] events by result (docs/operations.md)",
        );
        let approvals = register_approvals(r);
        Metrics {
            approvals,
            cluster,
            trace_spans,
            reloads,
            reload_ok,
            generation,
            registry,
            duration,
            requests,
            rounds,
            refusals,
            upstream_errors,
            parked,
            sessions,
            audit_dropped,
            in_flight,
            upstream_events,
            endpoints_out,
            health_changes,
            healthy,
            scraping: std::sync::Mutex::new(()),
            pins,
        }
    }

    /// Counts a change of a held call (`held`, `approved`, `denied`, `expired`, `withdrawn`).
    pub fn approval(&self, result: &'static str) {
        self.approvals.get_or_create(&ResultLabels { result }).inc();
    }

    /// Counts a request in progress until the guard is dropped.
    pub fn enter(self: &std::sync::Arc<Self>) -> InFlight {
        self.in_flight.inc();
        InFlight(self.clone())
    }

    /// MCP requests in progress now.
    pub fn in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Accounts one finished request.
    pub fn observe(&self, r: &Record, took: Duration) {
        let error_type = match (r.error_code, r.status) {
            (Some(c), _) => code_label(c),
            (None, s) if s >= 400 => status_label(s),
            _ => "ok",
        };
        let labels = OpLabels {
            mcp_method_name: method_label(r),
            upstream: r.upstream.clone().unwrap_or_default(),
            error_type,
        };
        self.duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.requests.get_or_create(&labels).inc();
        if !r.input_keys.is_empty() {
            self.rounds.inc();
        }
        if let Some(c) = r.error_code.filter(|c| (-31999..=-31000).contains(c)) {
            self.refusals
                .get_or_create(&KindLabels {
                    kind: code_label(c).into(),
                })
                .inc();
        }
        if matches!(r.status, 502 | 504) {
            self.upstream_errors
                .get_or_create(&KindLabels {
                    kind: r.upstream.clone().unwrap_or_default().into(),
                })
                .inc();
        }
    }

    /// Brings one upstream's resilience counts and breakers up to date (when scraped; one scrape
    /// at a time, so two cannot both add the same difference).
    pub fn upstream(&self, up: &crate::upstream::Upstream) {
        use std::sync::atomic::Ordering::Relaxed;
        let _one = self.scraping.lock();
        let c = &up.balancer.counts;
        for (event, total) in [
            ("ejected", &c.ejected),
            ("readmitted", &c.readmitted),
            ("shed", &c.shed),
            ("fast_failed", &c.fast_failed),
            ("retried", &c.retried),
        ] {
            let counter = self.upstream_events.get_or_create(&UpstreamLabels {
                upstream: up.name.clone(),
                event,
            });
            counter.inc_by(total.load(Relaxed).saturating_sub(counter.get()));
        }
        let out = up
            .balancer
            .endpoints
            .states()
            .iter()
            .filter(|(_, s)| *s != "closed")
            .count();
        self.endpoints_out
            .get_or_create(&NameLabels {
                upstream: up.name.clone(),
            })
            .set(out as i64);
        let (down, back) = up.health.changes();
        for (to, total) in [("down", down), ("up", back)] {
            let counter = self.health_changes.get_or_create(&HealthLabels {
                upstream: up.name.clone(),
                to,
            });
            counter.inc_by(total.saturating_sub(counter.get()));
        }
        self.healthy
            .get_or_create(&NameLabels {
                upstream: up.name.clone(),
            })
            .set(i64::from(up.status().healthy));
    }

    /// Accounts one config reload: applied (now serving `generation`) or failed.
    pub fn reloaded(&self, applied: Option<u64>) {
        let result = if applied.is_some() {
            "applied"
        } else {
            "failed"
        };
        self.reloads.get_or_create(&ResultLabels { result }).inc();
        self.reload_ok.set(i64::from(applied.is_some()));
        if let Some(g) = applied {
            self.generation.set(g as i64);
        }
    }

    /// Brings the span export counts up to date (when scraped; one scrape at a time).
    pub fn trace_exports(&self, (exported, failed): (u64, u64)) {
        let _one = self.scraping.lock();
        for (result, total) in [("exported", exported), ("failed", failed)] {
            let counter = self.trace_spans.get_or_create(&ResultLabels { result });
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    /// Brings the `[cluster]` counters up to date.
    pub fn cluster(&self, c: &crate::cluster::Cluster) {
        let _one = self.scraping.lock();
        let get = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        let totals = [
            ("redis_errors", get(&c.redis_errors)),
            ("redis_fallbacks", get(&c.fallbacks)),
            ("forwarded", get(&c.forwarded[0])),
            ("owner_gone", get(&c.forwarded[1])),
        ];
        for (result, total) in totals {
            let counter = self.cluster.get_or_create(&ResultLabels { result });
            counter.inc_by(total.saturating_sub(counter.get()));
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Registers a new metric of type `M` (at its default) as `name`, described by `help`; gives
/// it back to be kept.
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

/// Registers the gauges of what is held now: parked exchanges, legacy sessions, audit records
/// dropped and MCP requests in progress.
fn register_gauges(registry: &mut Registry) -> (Gauge, Gauge, Gauge, Gauge) {
    let parked = registered(
        registry,
        "sluice_parked_exchanges",
        "Exchanges parked waiting for a client's answers",
    );
    let sessions = registered(
        registry,
        "sluice_legacy_sessions",
        "Open sessions with legacy upstreams",
    );
    let audit_dropped = registered(
        registry,
        "sluice_audit_dropped",
        "Audit records dropped because the audit channel was full",
    );
    let in_flight = registered(
        registry,
        "sluice_requests_in_flight",
        "MCP requests in progress (until their response head)",
    );
    (parked, sessions, audit_dropped, in_flight)
}

/// Registers the count of calls held for an operator, by what became of them.
fn register_approvals(registry: &mut Registry) -> Family<ResultLabels, Counter> {
    registered(
        registry,
        "sluice_approvals",
        "Calls held for an operator's approval, by result: held, approved, denied, expired, withdrawn (the client went away)",
    )
}

/// Registers the upstream resilience metrics: breaker, shedding and retry events, and
/// endpoints out now.
fn register_resilience(
    r: &mut Registry,
) -> (Family<UpstreamLabels, Counter>, Family<NameLabels, Gauge>) {
    let upstream_events = registered(
        r,
        "sluice_upstream_resilience",
        "Per upstream: endpoints ejected and readmitted by their breakers, requests shed past max_in_flight, failed fast with every breaker open, retried on another endpoint",
    );
    let endpoints_out = registered(
        r,
        "sluice_upstream_endpoints_out",
        "Per upstream: endpoints whose breaker is open (or on trial) now",
    );
    (upstream_events, endpoints_out)
}

/// Registers the upstream health metrics: changes told (to down, to up) and healthy now.
fn register_health(
    registry: &mut Registry,
) -> (Family<HealthLabels, Counter>, Family<NameLabels, Gauge>) {
    let changes = registered(
        registry,
        "sluice_upstream_health_changes",
        "Per upstream: changes of its health, to down or to up (each also one log line)",
    );
    let healthy = registered(
        registry,
        "sluice_upstream_healthy",
        "Per upstream: 1 when it is healthy now, else 0",
    );
    (changes, healthy)
}

/// Registers the config reload metrics: reloads by result, whether the last one was applied
/// (1 until one fails) and the generation serving (1 at start).
fn register_reloads(registry: &mut Registry) -> (Family<ResultLabels, Counter>, Gauge, Gauge) {
    let reloads = registered(
        registry,
        "sluice_config_reloads",
        "Config reloads (SIGHUP) by result: applied, failed",
    );
    let reload_ok: Gauge = registered(
        registry,
        "sluice_config_last_reload_successful",
        "1 when the last config reload was applied (or none was tried), 0 when it failed and the previous config is serving",
    );
    reload_ok.set(1);
    let generation: Gauge = registered(
        registry,
        "sluice_config_generation",
        "The config generation serving: 1 at start, one more per applied reload",
    );
    generation.set(1);
    (reloads, reload_ok, generation)
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// A request in progress (see [`Metrics::enter`]).
pub struct InFlight(std::sync::Arc<Metrics>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

impl crate::audit::Observer for Metrics {
    fn observe(&self, r: &Record, took: Duration) {
        Metrics::observe(self, r, took);
    }
}

#[cfg(test)]
mod tests;
