// Sluice's operator console: reads the admin API (/admin/v1) and acts through it.
// No framework, no build step. Every value from the API is written with textContent:
// tool descriptions and names come from servers Sluice does not trust.
"use strict";

(function () {
  const API = "/admin/v1";
  const EVENTS_KEPT = 100;
  const DIFF_MAX_LINES = 2000;
  const DIFF_MAX_CELLS = 4000000;

  // The CSRF token of this sign-in: in memory only, sent on every non-GET request.
  let csrf = null;
  let stream = null;

  const $ = (id) => document.getElementById(id);

  // ---- the API ------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") {
      if (csrf) headers["X-CSRF-Token"] = csrf;
      headers["Content-Type"] = "application/json";
    }
    let res;
    try {
      res = await fetch(API + path, {
        method,
        headers,
        credentials: "same-origin",
        cache: "no-store",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      throw new ApiError(0, "unreachable", "Sluice's admin API cannot be reached.");
    }
    let data = null;
    const text = await res.text();
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (e) {
        data = null;
      }
    }
    if (!res.ok) {
      const err = data && data.error;
      const message = err && typeof err.message === "string" ? err.message : "HTTP " + res.status;
      const code = err && typeof err.code === "string" ? err.code : "http_" + res.status;
      if (res.status === 401 && path !== "/session") signedOut("Your session ended: sign in again.");
      throw new ApiError(res.status, code, message);
    }
    return data || {};
  }

  // ---- small DOM helpers --------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "text") node.textContent = String(v);
      else node.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function replace(id, ...nodes) {
    $(id).replaceChildren(...nodes);
  }

  function table(caption, heads, rows) {
    const thead = el("thead", {}, el("tr", {}, ...heads.map((h) => el("th", { scope: "col", text: h }))));
    const tbody = el("tbody", {}, ...rows);
    return el("div", { class: "scroll" }, el("table", {}, el("caption", { text: caption }), thead, tbody));
  }

  function cell(value) {
    return el("td", {}, value instanceof Node ? value : text(value));
  }

  function text(v) {
    if (v === null || v === undefined) return "—";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  function time(ms) {
    if (typeof ms !== "number") return "—";
    const d = new Date(ms);
    return d.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
  }

  function timeEl(ms) {
    if (typeof ms !== "number") return document.createTextNode("—");
    return el("time", { datetime: new Date(ms).toISOString(), text: time(ms) });
  }

  function empty(message) {
    return el("p", { class: "empty", text: message });
  }

  function say(message) {
    $("status").textContent = message;
  }

  function alertError(message) {
    $("alert").textContent = message;
  }

  function clearAlert() {
    $("alert").textContent = "";
  }

  // Runs an action from a button: disabled while it runs, its outcome announced.
  async function act(button, work, done) {
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    clearAlert();
    say("");
    try {
      const r = await work();
      if (done) say(done(r));
    } catch (e) {
      alertError(e.message);
    } finally {
      button.disabled = false;
      button.removeAttribute("aria-busy");
    }
  }

  // ---- sign-in ------------------------------------------------------------

  async function boot() {
    $("signin-form").addEventListener("submit", signIn);
    $("signout").addEventListener("click", signOut);
    $("reload").addEventListener("click", reload);
    $("audit-refresh").addEventListener("click", () => refresh("audit"));
    try {
      const s = await api("GET", "/session");
      signedIn(s);
    } catch (e) {
      if (e.status === 401) signedOut("");
      else {
        signedOut("");
        alertError(e.message);
      }
    }
  }

  async function signIn(ev) {
    ev.preventDefault();
    const key = $("key");
    const button = $("signin-button");
    $("signin-error").textContent = "";
    if (!key.value) {
      $("signin-error").textContent = "Enter an admin key.";
      key.setAttribute("aria-invalid", "true");
      key.focus();
      return;
    }
    button.disabled = true;
    try {
      const s = await api("POST", "/session", { key: key.value });
      key.value = "";
      key.removeAttribute("aria-invalid");
      signedIn(s);
    } catch (e) {
      $("signin-error").textContent = e.message;
      key.setAttribute("aria-invalid", "true");
      key.focus();
    } finally {
      button.disabled = false;
    }
  }

  function signedIn(s) {
    csrf = typeof s.csrf === "string" ? s.csrf : null;
    $("operator").textContent = "Signed in as " + text(s.operator) + " (" + text(s.via) + ")";
    $("who").hidden = false;
    $("signout").hidden = s.via === "loopback";
    $("signin").hidden = true;
    $("app").hidden = false;
    document.body.classList.add("signed-in");
    say("Signed in as " + text(s.operator) + ".");
    for (const p of Object.keys(PANELS)) refresh(p);
    listen();
    $("main").focus();
  }

  function signedOut(message) {
    csrf = null;
    if (stream) {
      stream.close();
      stream = null;
    }
    $("who").hidden = true;
    $("app").hidden = true;
    $("signin").hidden = false;
    document.body.classList.remove("signed-in");
    for (const k of Object.keys(shown)) delete shown[k];
    for (const id of ["config-body", "approvals-body", "pins-body", "upstreams-body", "principals-body", "events-list", "audit-body"]) {
      $(id).replaceChildren();
    }
    if (message) say(message);
    $("key").focus();
  }

  async function signOut() {
    const button = $("signout");
    await act(button, () => api("DELETE", "/session"), () => "Signed out.");
    signedOut("Signed out.");
  }

  // ---- panels -------------------------------------------------------------

  const PANELS = {
    config: [() => api("GET", "/config"), renderConfig],
    upstreams: [() => api("GET", "/upstreams"), renderUpstreams],
    approvals: [() => api("GET", "/approvals"), renderApprovals],
    pins: [() => api("GET", "/pins"), renderPins],
    principals: [() => api("GET", "/principals"), renderPrincipals],
    audit: [() => api("GET", "/audit?limit=50"), renderAudit],
  };
  const loading = {};
  // The last answer each panel rendered: an identical one is not rendered again, so a
  // refresh neither moves the reader's place nor takes the focus from a button.
  const shown = {};

  // Refreshes a panel; a refresh asked while one runs runs once more after it.
  async function refresh(name) {
    if (loading[name]) {
      loading[name] = "again";
      return;
    }
    loading[name] = true;
    const [load, render] = PANELS[name];
    const body = name + "-body";
    try {
      const data = await load();
      const same = JSON.stringify(data);
      if (shown[name] !== same) {
        shown[name] = same;
        keepingFocus(() => render(data));
      }
    } catch (e) {
      shown[name] = undefined;
      if (e.status !== 401) {
        replace(body, el("p", { class: "error", text: e.message }));
      }
    } finally {
      const again = loading[name] === "again";
      loading[name] = false;
      if (again) refresh(name);
    }
  }

  // Runs `render`; a button that had the focus gets it back in its new rendering.
  function keepingFocus(render) {
    const active = document.activeElement;
    const key = active && active.dataset ? active.dataset.focus : undefined;
    render();
    if (!key) return;
    for (const node of document.querySelectorAll("[data-focus]")) {
      if (node.dataset.focus === key) return node.focus();
    }
  }

  function renderConfig(c) {
    replace(
      "config-body",
      el("dt", { text: "Generation" }),
      el("dd", { id: "generation", text: text(c.generation) }),
      el("dt", { text: "Loaded" }),
      el("dd", {}, timeEl(c.loaded_at_ms)),
      el("dt", { text: "Source" }),
      el("dd", { text: text(c.source) })
    );
  }

  async function reload() {
    await act(
      $("reload"),
      () => api("POST", "/reload"),
      (r) => "Configuration reloaded: generation " + text(r.generation) + "."
    );
    refresh("config");
    refresh("upstreams");
  }

  function health(u) {
    const ok = u.healthy === true;
    const label = ok ? "healthy" : "unhealthy";
    return el("span", { class: "badge " + (ok ? "ok" : "bad") }, label, u.error ? ": " + text(u.error) : "");
  }

  function renderUpstreams(r) {
    $("upstreams-meta").textContent =
      "Replica " + text(r.replica) + ", configuration generation " + text(r.generation) + ".";
    const ups = Array.isArray(r.upstreams) ? r.upstreams : [];
    if (!ups.length) return replace("upstreams-body", empty("No upstreams are configured."));
    replace("upstreams-body", ...ups.map(upstreamCard));
  }

  function upstreamCard(u) {
    const id = "up-" + slug(u.name);
    const facts = el(
      "dl",
      { class: "facts" },
      el("dt", { text: "Health" }),
      el("dd", {}, health(u)),
      el("dt", { text: "Breaker" }),
      el("dd", {}, el("span", { class: "badge " + (u.breaker === "closed" ? "ok" : "warn"), text: text(u.breaker) })),
      el("dt", { text: "Transport" }),
      el("dd", { text: text(u.transport) + " (" + text(u.era) + ")" }),
      el("dt", { text: "Sessions" }),
      el("dd", { text: text(u.sessions) }),
      u.processes ? el("dt", { text: "Processes running" }) : null,
      u.processes ? el("dd", { text: text(u.processes.running) }) : null
    );
    const tools = Array.isArray(u.tools) ? u.tools : [];
    const toolTable = tools.length
      ? table(
          "Tools of " + text(u.name),
          ["Tool", "Title", "Description"],
          tools.map((t) => el("tr", {}, el("th", { scope: "row", text: text(t.name) }), cell(t.title), cell(t.description)))
        )
      : empty("No tools.");
    const history = Array.isArray(u.history) ? u.history.slice(-5).reverse() : [];
    const hist = history.length
      ? el(
          "details",
          {},
          el("summary", { text: "Health history" }),
          el(
            "ul",
            { class: "history" },
            ...history.map((h) =>
              el("li", {}, timeEl(h.time_ms), " ", h.healthy ? "healthy" : "unhealthy", h.reason ? ": " + text(h.reason) : "")
            )
          )
        )
      : null;
    return el(
      "article",
      { class: "card upstream", "aria-labelledby": id, "data-upstream": text(u.name) },
      el("h3", { id, text: text(u.name) }),
      facts,
      hist,
      el("h4", { text: "Tools (" + tools.length + ")" }),
      toolTable
    );
  }

  function slug(s) {
    return String(s).replace(/[^A-Za-z0-9_-]/g, "_");
  }

  function renderApprovals(r) {
    const list = Array.isArray(r.approvals) ? r.approvals : [];
    $("approvals-count").textContent = list.length ? "(" + list.length + ")" : "";
    if (!list.length) return replace("approvals-body", empty("No call is waiting for a decision."));
    const rows = list.map((a) => {
      const what = text(a.tool) + " on " + text(a.upstream) + " for " + text(a.principal);
      const approve = el("button", { type: "button", class: "approve", "aria-label": "Approve " + what, "data-focus": "approve:" + a.id, text: "Approve" });
      const deny = el("button", { type: "button", class: "deny", "aria-label": "Deny " + what, "data-focus": "deny:" + a.id, text: "Deny" });
      approve.addEventListener("click", () => decide(approve, a.id, "approve"));
      deny.addEventListener("click", () => decide(deny, a.id, "deny"));
      const shown = a.shown && typeof a.shown === "object" ? Object.entries(a.shown) : [];
      const args = el(
        "div",
        {},
        el("span", { text: "Keys: " + ((a.argument_keys || []).map(text).join(", ") || "none") }),
        ...shown.map(([k, v]) => el("div", { class: "shown", text: k + " = " + text(v) }))
      );
      return el(
        "tr",
        { "data-approval": text(a.id) },
        el("th", { scope: "row", text: text(a.tool) }),
        cell(a.method),
        cell(a.upstream),
        cell(a.principal),
        cell(args),
        cell(timeEl(a.held_at_ms)),
        cell(timeEl(a.expires_at_ms)),
        el("td", { class: "actions" }, approve, " ", deny)
      );
    });
    replace(
      "approvals-body",
      table("Calls held for an operator's decision", ["Tool", "Method", "Upstream", "Principal", "Arguments", "Held", "Expires", "Decision"], rows)
    );
  }

  async function decide(button, id, decision) {
    await act(
      button,
      () => api("POST", "/approvals/" + encodeURIComponent(id) + "/" + decision),
      (r) => "Call " + text(r.id) + ": " + text(r.decision) + " by " + text(r.operator) + "."
    );
    refresh("approvals");
    refresh("audit");
  }

  function renderPins(r) {
    const list = Array.isArray(r.pins) ? r.pins : [];
    const waiting = list.filter((p) => p.status === "quarantined");
    $("pins-count").textContent = waiting.length ? "(" + waiting.length + " quarantined)" : "";
    if (!list.length) return replace("pins-body", empty("No tool is pinned yet."));
    // Quarantined first: they wait for an operator.
    const sorted = waiting.concat(list.filter((p) => p.status !== "quarantined"));
    replace("pins-body", ...sorted.map(pinCard));
  }

  function pinCard(p) {
    const name = text(p.upstream) + " / " + text(p.tool);
    const id = "pin-" + slug(p.upstream) + "-" + slug(p.tool);
    const quarantined = p.status === "quarantined";
    const facts = el(
      "dl",
      { class: "facts" },
      el("dt", { text: "Status" }),
      el("dd", {}, el("span", { class: "badge " + (quarantined ? "bad" : "ok"), text: text(p.status) }), p.reason ? " (" + text(p.reason) + ")" : ""),
      el("dt", { text: "Pinned digest" }),
      el("dd", { class: "mono", text: text(p.digest) }),
      quarantined ? el("dt", { text: "New digest" }) : null,
      quarantined ? el("dd", { class: "mono", text: text(p.pending_digest) }) : null,
      el("dt", { text: "Changed" }),
      el("dd", {}, timeEl(p.changed_at_ms))
    );
    const card = el(
      "article",
      { class: "card pin" + (quarantined ? " quarantined" : ""), "aria-labelledby": id, "data-pin": name },
      el("h3", { id, text: name }),
      facts
    );
    if (quarantined) {
      card.append(el("h4", { text: "Definition change" }), diffView(p.before, p.after));
      const accept = el("button", { type: "button", class: "accept", "aria-label": "Accept the new definition of " + name, "data-focus": "accept:" + name, text: "Accept" });
      accept.addEventListener("click", () => acceptPin(accept, p));
      card.append(accept);
    }
    return card;
  }

  async function acceptPin(button, p) {
    const path = "/pins/" + encodeURIComponent(p.upstream) + "/" + encodeURIComponent(p.tool) + "/accept";
    await act(button, () => api("POST", path), () => "Accepted the new definition of " + text(p.upstream) + " / " + text(p.tool) + ".");
    refresh("pins");
    refresh("upstreams");
  }

  // ---- the diff -------------------------------------------------------------

  function pretty(v) {
    if (v === null || v === undefined) return [];
    return JSON.stringify(v, null, 2).split("\n");
  }

  // A line diff by longest common subsequence; null when too large to compute.
  function lineDiff(a, b) {
    let start = 0;
    while (start < a.length && start < b.length && a[start] === b[start]) start++;
    let endA = a.length;
    let endB = b.length;
    while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
      endA--;
      endB--;
    }
    const x = a.slice(start, endA);
    const y = b.slice(start, endB);
    const n = x.length;
    const m = y.length;
    if (n > DIFF_MAX_LINES || m > DIFF_MAX_LINES || (n + 1) * (m + 1) > DIFF_MAX_CELLS) return null;
    const w = m + 1;
    const lcs = new Uint16Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * w + j] = x[i] === y[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    const out = a.slice(0, start).map((l) => [" ", l]);
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[i] === y[j]) {
        out.push([" ", x[i]]);
        i++;
        j++;
      } else if (i < n && (j === m || lcs[(i + 1) * w + j] >= lcs[i * w + j + 1])) {
        out.push(["-", x[i]]);
        i++;
      } else {
        out.push(["+", y[j]]);
        j++;
      }
    }
    for (const l of a.slice(endA)) out.push([" ", l]);
    return out;
  }

  function diffView(before, after) {
    const lines = lineDiff(pretty(before), pretty(after));
    if (lines === null) return el("p", { class: "error", text: "This change is too large to diff here." });
    const added = lines.filter((l) => l[0] === "+").length;
    const removed = lines.filter((l) => l[0] === "-").length;
    const summary = el("p", { class: "meta", text: removed + " line(s) removed, " + added + " line(s) added." });
    const pre = el(
      "pre",
      { class: "diff", tabindex: "0", "aria-label": "Definition diff: lines starting with minus were removed, plus were added" },
      ...lines.map(([mark, line]) => {
        const cls = mark === "+" ? "add" : mark === "-" ? "del" : "same";
        return el("span", { class: cls }, (mark === " " ? "  " : mark + " ") + line + "\n");
      })
    );
    return el("div", {}, summary, pre);
  }

  // ---- principals, audit ----------------------------------------------------

  function pairs(o) {
    if (!o || typeof o !== "object") return "—";
    return Object.entries(o).map(([k, v]) => k + " " + text(v)).join(", ") || "—";
  }

  function renderPrincipals(r) {
    const list = Array.isArray(r.principals) ? r.principals : [];
    if (!list.length) return replace("principals-body", empty("No principal has used Sluice yet."));
    const rows = list.map((p) => {
      const budget = p.budget ? "used: " + pairs(p.budget.used) + "; left: " + pairs(p.budget.left) : "no budget";
      const quotas = (p.quotas || []).map((q) => text(q.rule) + " " + text(q.used) + "/" + text(q.limit)).join("; ") || "—";
      return el(
        "tr",
        {},
        el("th", { scope: "row", text: text(p.principal) }),
        cell(budget),
        cell(quotas),
        cell(p.parked),
        cell(p.sessions),
        cell((p.tokens || []).map(text).join(", ") || "—")
      );
    });
    replace("principals-body", table("Principals", ["Principal", "Budget", "Quotas", "Parked", "Sessions", "Upstream tokens"], rows));
  }

  function renderAudit(r) {
    const list = Array.isArray(r.records) ? r.records : [];
    if (!list.length) return replace("audit-body", empty("No audit records yet."));
    const rows = list.map((a) =>
      el(
        "tr",
        {},
        cell(timeEl(a.time_ms)),
        cell(a.principal),
        cell(a.method),
        cell(a.name),
        cell(a.upstream),
        cell(a.decision),
        cell(a.status)
      )
    );
    replace("audit-body", table("The latest audit records, newest first", ["Time", "Principal", "Method", "Name", "Upstream", "Decision", "Status"], rows));
  }

  // ---- the live event stream ------------------------------------------------

  const AFFECTS = {
    health: ["upstreams"],
    approval: ["approvals", "audit"],
    pin: ["pins", "upstreams"],
    reload: ["config", "upstreams", "principals", "pins"],
    // This console fell behind the stream: every panel may be stale.
    lagged: ["config", "upstreams", "approvals", "pins", "principals", "audit"],
  };

  function listen() {
    if (stream || typeof EventSource === "undefined") return;
    stream = new EventSource(API + "/events", { withCredentials: true });
    stream.onopen = () => {
      $("events-state").textContent = "Connected: new events appear below.";
    };
    stream.onerror = () => {
      $("events-state").textContent = "Disconnected: reconnecting…";
    };
    for (const kind of Object.keys(AFFECTS)) {
      stream.addEventListener(kind, (ev) => onEvent(kind, ev));
    }
  }

  function onEvent(kind, ev) {
    let e = {};
    try {
      e = JSON.parse(ev.data) || {};
    } catch (err) {
      e = {};
    }
    const list = $("events-list");
    const detail = e && e.data && typeof e.data === "object" ? pairs(e.data) : "";
    list.prepend(
      el("li", { class: "event " + kind }, timeEl(e.time_ms), " ", el("strong", { text: kind }), " #" + text(e.seq) + " on " + text(e.replica) + ": " + detail)
    );
    while (list.children.length > EVENTS_KEPT) list.lastElementChild.remove();
    for (const p of AFFECTS[kind] || []) refresh(p);
  }

  // Exposed for the browser test of the diff (no data, no side effects).
  window.sluiceConsole = { lineDiff };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
