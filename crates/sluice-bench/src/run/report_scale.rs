//! The markdown of the scale part: federation, parked exchanges, client sessions, idle
//! connections and a stdio server's processes for one principal's client sessions, each size a
//! row, with the cost per item between the smallest and largest size.
//! Takes what [`super::scale`] measured; gives the text and the call-latency growth it judges.

use std::fmt::Write as _;

use super::scale::Scale;

fn mib(k: u64) -> f64 {
    k as f64 / 1024.0
}

/// KiB per item between two (items, KiB) points: the slope of the cost curve.
fn slope(a: (usize, u64), b: (usize, u64)) -> f64 {
    if b.0 == a.0 {
        return f64::NAN;
    }
    (b.1 as f64 - a.1 as f64) / (b.0 as f64 - a.0 as f64)
}

/// Writes the scale tables; gives a call's p50 with the most upstreams over that with the fewest.
pub(crate) fn render(md: &mut String, s: &Scale, conn_per_kib: (f64, f64), nofile: usize) -> f64 {
    let _ = writeln!(md, "\n#### Scale: federation (one mock process, one listener per upstream; fresh processes per size)\n");
    let _ = writeln!(
        md,
        "| upstreams | ready after start (ms) | idle RSS (MiB) | RSS after the calls (MiB) | `tools/list` first (µs) | `tools/list` warm p50 (µs) | tools listed | `tools/call` p50 (µs) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for f in &s.fed {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.1} | {:.1} | {:.0} | {:.0} | {} | {:.0} |",
            f.n,
            f.ready_ms,
            mib(f.idle_kib),
            mib(f.after_kib),
            f.list_first_us,
            f.list_warm_us,
            f.tools,
            f.call_p50_us
        );
    }
    let growth = match (s.fed.first(), s.fed.last()) {
        (Some(a), Some(b)) => {
            let _ = writeln!(
                md,
                "\nIdle RSS per upstream between {} and {}: {:.1} KiB. A call's p50 with {} upstreams over that with {}: **{:.2}** (calls spread over every upstream).",
                a.n,
                b.n,
                slope((a.n, a.idle_kib), (b.n, b.idle_kib)),
                b.n,
                a.n,
                b.call_p50_us / a.call_p50_us
            );
            b.call_p50_us / a.call_p50_us
        }
        _ => f64::NAN,
    };
    parked(md, s, conn_per_kib, nofile);
    clients(md, s);
    growth
}

fn parked(md: &mut String, s: &Scale, (conn_per_kib, h2_per_kib): (f64, f64), nofile: usize) {
    let _ = writeln!(md, "\n#### Scale: parked bridge-A exchanges (`park_ms` 10 min, so none expires while measured)\n");
    let _ = writeln!(md, "| to the upstream | asked | parked | RSS before → after (MiB) | per exchange (KiB) | of which Sluice's own (KiB) | idle CPU with them parked (ms/s) | time to park (s) |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    for p in &s.parked {
        let per = (p.after_kib as f64 - p.before_kib as f64) / p.n.max(1) as f64;
        let (wire, base) = if p.http2 {
            ("HTTP/2 (`http2 = true`)", h2_per_kib)
        } else {
            ("HTTP/1.1", conn_per_kib)
        };
        let _ = writeln!(
            md,
            "| {wire} | {} | {}{} | {:.1} → {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            p.asked,
            p.n,
            if p.n < p.asked { " (capped)" } else { "" },
            mib(p.before_kib),
            mib(p.after_kib),
            per,
            per - base,
            p.idle_cpu_ms_per_s,
            p.park_s
        );
    }
    if s.parked.iter().any(|p| p.n < p.asked) {
        let _ = writeln!(
            md,
            "\nCapped: each parked exchange holds two upstream connections (its legacy session's GET stream and its call's stream) in Sluice and in the mock, and this machine's open-files limit is {nofile} per process (the hard limit; raising it needs CAP_SYS_RESOURCE). Sizes past ~{} need a host with a higher `ulimit -n`.",
            nofile.saturating_sub(600) / 2
        );
    }
    let _ = writeln!(md, "\n\"Own\" subtracts the connections-only baseline of the memory table ({conn_per_kib:.1} KiB per exchange over HTTP/1.1; over HTTP/2, `hold` holding the same streams on one connection: {h2_per_kib:.1} KiB). Over HTTP/2 every exchange's two streams are on one connection per upstream, so no size is capped by the open-files limit. Idle CPU is what the parked table's sweep (one task, every 250 ms) and nothing else costs while the exchanges wait.");
}

fn clients(md: &mut String, s: &Scale) {
    let _ = writeln!(
        md,
        "\n#### Scale: 2025-11-25 client sessions (bridge B) and idle client connections\n"
    );
    let _ = writeln!(md, "| 2025-11-25 sessions | RSS before → after (MiB) | per session (KiB) | opened per second (32 at a time) | a call's p50 on one of them (µs) |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    for x in &s.sessions {
        let _ = writeln!(
            md,
            "| {} | {:.1} → {:.1} | {:.2} | {:.0} | {:.0} |",
            x.n,
            mib(x.before_kib),
            mib(x.after_kib),
            (x.after_kib as f64 - x.before_kib as f64) / x.n.max(1) as f64,
            x.n as f64 / x.open_s.max(1e-9),
            x.call_p50_us
        );
    }
    let _ = writeln!(
        md,
        "\n| idle client connections (one `GET /healthz` each, kept alive) | RSS before → after (MiB) | per connection (KiB) |"
    );
    let _ = writeln!(md, "|---|---|---|");
    for x in &s.conns {
        let _ = writeln!(
            md,
            "| {} | {:.1} → {:.1} | {:.2} |",
            x.n,
            mib(x.before_kib),
            mib(x.after_kib),
            (x.after_kib as f64 - x.before_kib as f64) / x.n.max(1) as f64
        );
    }
    let _ = writeln!(md, "\nKernel socket buffers are not in RSS; per-connection figures are Sluice's user-space share.");
    stdio(md, s);
}

fn stdio(md: &mut String, s: &Scale) {
    let _ = writeln!(md, "\n#### Scale: one principal's client sessions to a 2025-11-25 stdio server (through Sluice)\n");
    let _ = writeln!(md, "| client sessions, one after another (a call each) | processes under Sluice after | RSS of Sluice (MiB) | RSS of those processes (MiB) | per session (ms) |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    for x in &s.stdio {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {:.1} | {:.1} |",
            x.n,
            x.processes,
            mib(x.sluice_kib),
            mib(x.children_kib),
            x.per_session_ms
        );
    }
    let _ = writeln!(
        md,
        "\nThe upstream's defaults (`max_processes` 4, `spare_processes` 1, `idle_ms` 60 s): the principal's sessions share one process, Sluice's own lists another, and one warm spare waits; none grows with the number of client sessions (`sluice-bench stdio-upstream` is a small server: a real one costs its runtime, 50 to 100 MB for Node or Python, per process)."
    );
}
