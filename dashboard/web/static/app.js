// yidu dashboard page script. Plain JS, no build step, no CDN.
// Data is only ever written with textContent and DOM nodes: no HTML parsing.
"use strict";

// The page's language is <html lang> (the server chose it); its words come
// from /i18n/<lang>.json, the same catalogue the templates use. tr(key)
// before the catalogue has loaded returns the key.
const LANG = document.documentElement.lang || "zh-CN";
let catalogue = {};
function tr(key) { return Object.prototype.hasOwnProperty.call(catalogue, key) ? catalogue[key] : key; }
// roundState names a follow-up round's state; each key spelt out, so the
// catalogue test sees them all.
function roundState(state) {
  switch (state) {
    case "cancelled": return tr("follow.state.cancelled");
    case "failed": return tr("follow.state.failed");
    case "pending": return tr("follow.state.pending");
    case "sending": return tr("follow.state.sending");
    case "skipped": return tr("follow.state.skipped");
    default: return state;
  }
}
// trf is tr with placeholders {0}, {1}, … filled from args in order
// (compose.js shares tr, trf, LANG and catalogueReady: app.js loads first).
function trf(key, ...args) { return tr(key).replace(/\{(\d+)\}/g, (m, i) => (i < args.length ? String(args[i]) : m)); }
const catalogueReady = fetch("/i18n/" + encodeURIComponent(LANG) + ".json", { credentials: "same-origin" })
  .then((r) => (r.ok ? r.json() : {})).then((c) => { catalogue = c; }, () => {});
const numFmt = new Intl.NumberFormat(LANG);

// Times: the server writes UTC; every <time datetime> is shown in the
// viewer's time zone, 24-hour, as 2026-12-03 18:05; the zone is named only
// when it is not the corp's (Asia/Shanghai).
const CORP_ZONE = "Asia/Shanghai";
const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
const timeFmt = new Intl.DateTimeFormat(LANG, Object.assign({
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23",
}, viewerZone === CORP_ZONE ? {} : { timeZoneName: "short" }));
function isoLike(d) {
  const p = {};
  for (const x of timeFmt.formatToParts(d)) p[x.type] = x.value;
  return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + (p.timeZoneName ? " " + p.timeZoneName : "");
}
function fmtTime(s) {
  if (!s) return "–";
  const d = new Date(s);
  if (isNaN(d.getTime())) return "–";
  return isoLike(d);
}
function localTimes(root) {
  for (const t of root.querySelectorAll("time[datetime]")) {
    t.textContent = fmtTime(t.getAttribute("datetime"));
    t.title = t.getAttribute("datetime");
  }
}
localTimes(document);

// A status line (the demo setting up in the background) over an empty,
// unsearched list: the list reloads until a notice appears.
(function () {
  const list = document.getElementById("messages");
  if (document.getElementById("status-line") && list && !list.querySelector(".message") && !location.search) {
    setTimeout(() => location.reload(), 3000);
  }
})();

catalogueReady.then(function () {
  const root = document.getElementById("message");
  if (!root) return;
  const msgid = root.dataset.msgid;
  const api = "/api/v1/messages/" + encodeURIComponent(msgid);
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmtETA(e) {
    if (!e) return "–";
    if (e.seconds <= 0) return tr("eta.reached");
    const s = e.seconds;
    if (s < 90) return trf("eta.seconds", numFmt.format(Math.round(s)));
    if (s < 5400) return trf("eta.minutes", numFmt.format(Math.round(s / 60)));
    return trf("eta.hours", numFmt.format(Math.round(s / 360) / 10));
  }
  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
    if (r.status === 401) { location.href = "/login"; throw new Error("signed out"); }
    if (!r.ok) throw new Error("HTTP " + r.status);
    return r.json();
  }

  // --- progress (SSE) -------------------------------------------------
  function showProgress(p) {
    showStateCounts(p);
    $("read-count").textContent = p.read;
    $("recipient-count").textContent = p.recipients;
    $("unread-count").textContent = p.unread;
    $("percent").textContent = p.percent;
    $("progress-bar").value = p.percent;
    $("rate").textContent = p.rate_per_minute == null ? "–" : p.rate_per_minute.toFixed(1);
    $("eta-90").textContent = fmtETA(p.eta_90);
    $("eta-100").textContent = fmtETA(p.eta_100);
    if (p.by_signal) {
      $("signal-button").textContent = p.by_signal.button;
      $("signal-link").textContent = p.by_signal.link;
      $("signal-enter-agent").textContent = p.by_signal.enter_agent;
      $("signal-read-to-end").textContent = p.by_signal.read_to_end || 0;
      $("signal-acknowledged").textContent = p.by_signal.acknowledged || 0;
    }
    drawCurve(p);
  }

  // --- reads over time (hand-written SVG) -----------------------------
  // Cumulative flushed reads per bucket as a step line, a count axis on
  // the left, a percent axis on the right, a time axis in the viewer's
  // zone, the 90 % line and a read-out that follows the pointer. Drawn at
  // the element's own pixel width, so text keeps its size on a phone.
  const svgNS = "http://www.w3.org/2000/svg";
  let lastProgress = null, curvePts = [], followRounds = [];
  function svgEl(tag, attrs, text) {
    const e = document.createElementNS(svgNS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  const hm = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  const zoneName = (() => {
    const p = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(new Date());
    const z = p.find((x) => x.type === "timeZoneName");
    return z ? z.value : Intl.DateTimeFormat().resolvedOptions().timeZone;
  })();
  function niceStep(span, n) {
    const raw = span / Math.max(1, n);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
    return 10 * mag;
  }
  const minuteSteps = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440];
  function drawCurve(p) {
    lastProgress = p;
    const svg = $("curve");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const W = Math.max(280, Math.round(svg.getBoundingClientRect().width || 600));
    const H = 230, L = 48, R = 44, T = 22, B = 36;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    const pw = W - L - R, ph = H - T - B;
    const N = p.recipients || 0;
    const t0 = new Date(p.sent_at).getTime();
    const pts = p.curve || [];
    const bucket = 60000 * (p.bucket_minutes || 1);
    const lastAt = pts.length ? new Date(pts[pts.length - 1].at).getTime() + bucket : t0;
    const t1 = Math.max(new Date(p.as_of).getTime(), lastAt, t0 + 5 * 60000);
    const x = (t) => L + ((t - t0) / (t1 - t0)) * pw;
    const y = (n) => T + ph - (N ? (n / N) * ph : 0);

    // Grid and count axis (left), percent axis (right).
    const cstep = niceStep(Math.max(N, 1), 4);
    for (let v = 0; v <= N; v += cstep) {
      svg.appendChild(svgEl("line", { x1: L, x2: L + pw, y1: y(v), y2: y(v), class: "grid" }));
      svg.appendChild(svgEl("text", { x: L - 6, y: y(v) + 4, class: "tick count", "text-anchor": "end" }, v));
    }
    for (const pc of [0, 25, 50, 75, 100]) {
      svg.appendChild(svgEl("text", { x: L + pw + 6, y: y(N * pc / 100) + 4, class: "tick percent" }, pc + "%"));
    }
    // Time axis: ticks at round minutes in the viewer's zone.
    const spanMin = (t1 - t0) / 60000;
    const stepMin = minuteSteps.find((m) => spanMin / m <= Math.max(2, Math.floor(pw / 70))) || 1440;
    const offset = new Date(t0).getTimezoneOffset() * 60000;
    let tick = Math.ceil((t0 - offset) / (stepMin * 60000)) * stepMin * 60000 + offset;
    for (; tick <= t1; tick += stepMin * 60000) {
      svg.appendChild(svgEl("line", { x1: x(tick), x2: x(tick), y1: T + ph, y2: T + ph + 4, class: "axis" }));
      svg.appendChild(svgEl("text", { x: x(tick), y: T + ph + 16, class: "tick time", "text-anchor": "middle" }, hm.format(new Date(tick))));
    }
    svg.appendChild(svgEl("line", { x1: L, x2: L + pw, y1: T + ph, y2: T + ph, class: "axis" }));
    svg.appendChild(svgEl("line", { x1: L, x2: L, y1: T, y2: T + ph, class: "axis" }));
    svg.appendChild(svgEl("text", { x: L + pw / 2, y: H - 3, class: "axis-label", "text-anchor": "middle" }, tr("curve.axis_time") + " (" + zoneName + ")"));
    svg.appendChild(svgEl("text", { x: 4, y: 13, class: "axis-label" }, tr("count.read_cap")));
    // The 90 % line.
    if (N) {
      svg.appendChild(svgEl("line", { x1: L, x2: L + pw, y1: y(0.9 * N), y2: y(0.9 * N), class: "target" }));
      svg.appendChild(svgEl("text", { x: L + 4, y: y(0.9 * N) - 4, class: "target-label" }, "90%"));
    }
    // The step line: flat until the bucket the reads happened in, then up
    // across it; a straight line from the send would invent reads.
    // Thinner lines under it: the reads each signal made count.
    const sigs = ["button", "link", "enter_agent"];
    const cum = { total: 0, button: 0, link: 0, enter_agent: 0 };
    const coords = { total: [], button: [], link: [], enter_agent: [] };
    const at = (k, t) => coords[k].push(x(t).toFixed(1) + "," + y(cum[k]).toFixed(1));
    for (const k in coords) at(k, t0);
    curvePts = [{ t: t0, n: 0, by: { button: 0, link: 0, enter_agent: 0 } }];
    // Time only moves forward (issue 49: the first bucket's point was
    // drawn a whole bucket after the send, past the second bucket's start,
    // so the line ran backwards): each bucket runs from its minute (not
    // before the send, nor before the last point) to its end.
    let prevEnd = t0;
    for (const c of pts) {
      const at0 = new Date(c.at).getTime();
      const start = Math.max(prevEnd, at0);
      const end = Math.max(start, at0 + bucket);
      for (const k in coords) at(k, start);
      cum.total += c.reads;
      for (const k of sigs) cum[k] += (c.by_signal && c.by_signal[k]) || 0;
      for (const k in coords) at(k, end);
      curvePts.push({ t: end, n: cum.total, by: { button: cum.button, link: cum.link, enter_agent: cum.enter_agent } });
      prevEnd = end;
    }
    for (const k in coords) at(k, t1);
    for (const k of sigs) {
      if (cum[k] > 0) svg.appendChild(svgEl("polyline", { points: coords[k].join(" "), class: "sig-line sig-" + k.replace("_", "-") }));
    }
    svg.appendChild(svgEl("polyline", { points: coords.total.join(" "), class: "line" }));
    // Each reminder round that sent (a spread one: its first part),
    // marked where it started (issue 30); a label too close to the one
    // before goes a line lower.
    let lastLabel = -Infinity, labelRow = 0;
    for (const r of followRounds) {
      const t = new Date(r.at).getTime();
      const started = r.state === "sent" || r.state === "sending" || (r.state === "pending" && r.sent_to > 0);
      if (!started || t < t0 || t > t1) continue;
      svg.appendChild(svgEl("line", { x1: x(t), x2: x(t), y1: T, y2: T + ph, class: "round-mark" }));
      const label = tr("follow.round_n").replace("{n}", r.round);
      labelRow = x(t) - lastLabel < label.length * 8 + 6 ? (labelRow + 1) % 4 : 0;
      lastLabel = x(t);
      svg.appendChild(svgEl("text", { x: x(t) + 3, y: T + 10 + labelRow * 12, class: "round-label" }, label));
    }
    svg.appendChild(svgEl("line", { id: "curve-cursor", x1: 0, x2: 0, y1: T, y2: T + ph, class: "cursor", visibility: "hidden" }));
    svg.dataset.l = L; svg.dataset.pw = pw; svg.dataset.t0 = t0; svg.dataset.t1 = t1; svg.dataset.w = W;
    drawSignals(p);
  }
  function readout(ev) {
    const svg = $("curve"), p = lastProgress;
    if (!p || !curvePts.length) return;
    const r = svg.getBoundingClientRect();
    const W = +svg.dataset.w, L = +svg.dataset.l, pw = +svg.dataset.pw, t0 = +svg.dataset.t0, t1 = +svg.dataset.t1;
    const px = ((ev.clientX - r.left) / r.width) * W;
    const t = t0 + Math.max(0, Math.min(1, (px - L) / pw)) * (t1 - t0);
    let n = 0, by = { button: 0, link: 0, enter_agent: 0 };
    for (const c of curvePts) { if (c.t <= t) { n = c.n; by = c.by; } else break; }
    const cur = $("curve-cursor");
    if (cur) {
      const cx = L + ((t - t0) / (t1 - t0)) * pw;
      cur.setAttribute("x1", cx); cur.setAttribute("x2", cx); cur.setAttribute("visibility", "visible");
    }
    const pc = p.recipients ? (100 * n / p.recipients).toFixed(1) : "0";
    $("curve-readout").textContent = fmtTime(new Date(t).toISOString()) + " · " + n + " " + tr("count.read") + " (" + pc + "%)" +
      " · " + tr("signal.button") + " " + by.button + " · " + tr("signal.link") + " " + by.link + " · " + tr("signal.enter_agent") + " " + by.enter_agent;
  }
  $("curve").addEventListener("pointermove", readout);
  $("curve").addEventListener("pointerdown", readout);
  $("curve").addEventListener("pointerleave", () => {
    const cur = $("curve-cursor");
    if (cur) cur.setAttribute("visibility", "hidden");
    $("curve-readout").textContent = "";
  });
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (lastProgress) drawCurve(lastProgress); }, 150);
  });
  // Per-signal breakdown: one stacked bar of the members by their signal.
  function drawSignals(p) {
    const box = $("signal-bar");
    if (!box || !p.by_signal) return;
    while (box.firstChild) box.removeChild(box.firstChild);
    const parts = [["button", tr("signal.button")], ["link", tr("signal.link")], ["enter_agent", tr("signal.enter_agent")]];
    const total = parts.reduce((a, [k]) => a + (p.by_signal[k] || 0), 0);
    for (const [k, label] of parts) {
      const n = p.by_signal[k] || 0;
      const seg = el("span", null, "seg sig-" + k.replace("_", "-"));
      seg.style.width = (total ? (100 * n / total) : 0) + "%";
      seg.title = label + ": " + n;
      box.appendChild(seg);
    }
  }

  // Departments are heavier: refreshed at most every 10 s, and always once
  // after the last change, so the table never stays behind the numbers.
  let lastRefresh = 0, refreshTimer = null;
  function onProgress(p) {
    showProgress(p);
    if (refreshTimer) return;
    const wait = Math.max(0, lastRefresh + 10000 - Date.now());
    refreshTimer = setTimeout(() => {
      refreshTimer = null; lastRefresh = Date.now(); loadDepartments();
      // The people list follows too, unless the user paged further down.
      if (pages <= 1) { cursor = ""; loadRecipients(false); }
    }, wait);
  }

  let pollTimer = null;
  if (window.EventSource) {
    const es = new EventSource(api + "/events");
    es.addEventListener("progress", (ev) => { $("live").classList.add("on"); onProgress(JSON.parse(ev.data)); });
    es.onerror = () => {
      $("live").classList.remove("on");
      // Refused for good (429: this person's streams are at their
      // maximum; 503: all are taken): poll instead.
      if (es.readyState === EventSource.CLOSED && !pollTimer) {
        pollTimer = setInterval(() => getJSON(api + "/progress").then(onProgress).catch(() => {}), 5000);
      }
    };
  } else {
    setInterval(() => getJSON(api + "/progress").then(onProgress).catch(() => {}), 5000);
  }
  getJSON(api + "/progress").then(showProgress).catch(() => {});

  // --- follow-up rounds (issue 30) --------------------------------------
  // The message JSON carries follow_up when the notice has a policy (GET
  // .../follow_up would be a 404 without one); else the section stays
  // hidden. Refreshed each minute: a round's effect grows for 24 h.
  const fullTime = new Intl.DateTimeFormat(undefined, { month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
  function cell(tr_, text) {
    const td = document.createElement("td");
    td.textContent = text;
    tr_.appendChild(td);
  }
  function showFollowUp(fu) {
    followRounds = fu.rounds || [];
    $("follow-up").hidden = false;
    let next = tr("follow.none_next");
    if (fu.stopped) next = tr("follow.stopped").replace("{reason}", fu.stopped);
    else if (fu.next_at) next = tr("follow.next").replace("{n}", fu.next_round).replace("{at}", fullTime.format(new Date(fu.next_at)));
    $("follow-next").textContent = next;
    const body = $("follow-rows");
    while (body.firstChild) body.removeChild(body.firstChild);
    for (const r of followRounds) {
      const row = document.createElement("tr");
      const label = tr("follow.round_n").replace("{n}", r.round);
      cell(row, r.state === "sent" ? label : label + "（" + roundState(r.state) + "）");
      if (r.spread_until) {
        const note = document.createElement("div");
        note.className = "muted spread";
        note.textContent = r.state === "pending" || r.state === "sending"
          ? tr("follow.spread").replace("{at}", fullTime.format(new Date(r.spread_until)))
          : tr("follow.spread_done");
        row.firstChild.appendChild(note);
      }
      cell(row, fullTime.format(new Date(r.at)));
      cell(row, String(r.sent_to));
      cell(row, tr("follow.effect_1h").replace("{n}", r.read_within_1h));
      cell(row, String(r.read_within_24h));
      cell(row, r.escalated ? tr("follow.yes") : tr("follow.no"));
      body.appendChild(row);
    }
    if (lastProgress) drawCurve(lastProgress);
  }
  function loadFollowUp() {
    getJSON(api)
      .then((m) => { if (m && m.follow_up) catalogueReady.then(() => showFollowUp(m.follow_up)); })
      .catch(() => {});
  }
  loadFollowUp();
  setInterval(loadFollowUp, 60000);

  // --- a standing notice (issue 51): its badge, the joiners pending, the last 30
  // days' joiners and each cycle. 404: not a standing notice.
  function showStanding(st) {
    $("standing").hidden = false;
    $("standing-pending").textContent = trf("message.standing_pending", numFmt.format(st.pending_joiners));
    $("standing-ended").hidden = st.in_force;
    $("standing-cycles").textContent = (st.by_cycle || []).map((c) =>
      trf("message.standing_cycle", c.cycle, numFmt.format(c.acknowledged), numFmt.format(c.recipients))).join(" · ");
    const body = $("standing-rows");
    while (body.firstChild) body.removeChild(body.firstChild);
    for (const j of st.joiners || []) {
      const row = document.createElement("tr");
      cell(row, (j.name || j.userid) + (j.left ? "（" + tr("message.joiner_left") + "）" : ""));
      cell(row, fullTime.format(new Date(j.joined_at)));
      cell(row, fullTime.format(new Date(j.deadline)));
      cell(row, j.read ? tr("message.joiner_read") : j.overdue ? tr("message.joiner_overdue") : tr("message.joiner_unread"));
      body.appendChild(row);
    }
  }
  function loadStanding() {
    fetch(api + "/standing", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then((r) => (r.ok ? r.json() : null))
      .then((st) => { if (st) catalogueReady.then(() => showStanding(st)); })
      .catch(() => {});
  }
  if ($("standing").dataset.standing === "true") {
    loadStanding();
    setInterval(loadStanding, 60000);
  }

  // --- reminder history: each reminder by hand and what it achieved ---
  async function loadReminders() {
    if (!$("reminders")) return; // a leader's page: the history counts the whole notice
    let j;
    try { j = await getJSON(api + "/reminders"); } catch (_) { return; } // a leader: not theirs to see
    await catalogueReady;
    const rs = j.reminders || [];
    $("reminders").hidden = rs.length === 0;
    const tb = $("reminder-rows").tBodies[0];
    tb.replaceChildren();
    for (const r of rs.slice().reverse()) {
      const row = el("tr");
      row.appendChild(el("td", fmtTime(r.at)));
      row.appendChild(el("td", r.by));
      row.appendChild(el("td", numFmt.format(r.people), "num"));
      row.appendChild(el("td", numFmt.format(r.read_within_1h), "num"));
      row.appendChild(el("td", numFmt.format(r.read_since), "num"));
      tb.appendChild(row);
    }
  }
  loadReminders();

  // --- full text and its versions (issue 39) ---------------------------
  // GET .../content?v=N: every version stays readable; the html is the
  // server's sanitized rendering (no script, image or event handler).
  async function showVersion(n) {
    let v;
    try { v = await getJSON(api + "/content" + (n ? "?v=" + n : "")); } catch (_) { return; }
    await catalogueReady;
    $("fulltext-card").hidden = false;
    const pick = $("version-pick");
    if (pick.options.length !== v.versions) {
      pick.replaceChildren();
      for (let i = v.versions; i >= 1; i--) {
        const o = document.createElement("option");
        o.value = String(i);
        o.textContent = trf("fulltext.version_n", i) + (i === v.versions ? tr("fulltext.current") : "");
        pick.appendChild(o);
      }
    }
    pick.value = String(v.version);
    let meta = trf("fulltext.created", fmtTime(v.created_at), v.created_by);
    if (v.version > 1) meta += " · " + tr(v.reacknowledge ? "fulltext.material" : "fulltext.not_material");
    const rules = { app: tr("fulltext.rule.app"), link: tr("fulltext.rule.link"), read_to_end: tr("fulltext.rule.read_to_end"), acknowledged: tr("fulltext.rule.acknowledged") };
    meta += " · " + (rules[v.read_rule] || rules.app);
    if (v.change_note) meta += " · " + trf("fulltext.change_note", v.change_note);
    $("version-meta").textContent = meta;
    $("version-title").textContent = v.title;
    // Parsed inert (DOMParser runs no script) and moved in as nodes.
    $("version-text").replaceChildren(...new DOMParser().parseFromString(v.html, "text/html").body.childNodes);
    const ul = $("version-attachments");
    ul.replaceChildren();
    for (const a of v.attachments) {
      const li = document.createElement("li");
      li.textContent = a.name + " · " + (a.size >= 1048576 ? (a.size / 1048576).toFixed(1) + " MB" : Math.max(1, Math.round(a.size / 1024)) + " KB") + " · " + a.sha256.slice(0, 12);
      ul.appendChild(li);
    }
    $("version-sha").textContent = v.sha256;
    // Progress per version (by_version): who opened, read to the end and
    // acknowledged each version.
    const bv = v.by_version || [];
    $("by-version").hidden = bv.length === 0;
    const tb = $("by-version").tBodies[0];
    tb.replaceChildren();
    for (const c of bv.slice().reverse()) {
      const tr0 = document.createElement("tr");
      for (const [text, cls] of [[trf("fulltext.version_n", c.version), ""], [numFmt.format(c.link), "num"], [numFmt.format(c.read_to_end), "num"], [numFmt.format(c.acknowledged), "num"]]) {
        const td = document.createElement("td");
        td.textContent = text;
        if (cls) td.className = cls;
        tr0.appendChild(td);
      }
      tb.appendChild(tr0);
    }
    // Why the read count dropped: a version that asks everyone again.
    const cur = v.versions;
    if (v.version === cur && cur > 1 && v.material_version > 1) {
      $("reack-note").hidden = false;
      $("reack-note").textContent = trf("revise.reack_note", v.material_version);
    } else {
      $("reack-note").hidden = true;
    }
    // The top counters say which version they count once a version asked
    // everyone again (issue 49); by_version below splits them.
    if (v.version === cur) {
      const cv = $("counter-version");
      cv.hidden = !(v.material_version > 1);
      cv.textContent = v.material_version === cur ? trf("message.counter_version", cur) : trf("message.counter_since", v.material_version, cur);
    }
    if (v.version === cur) current = v;
  }
  let current = null;
  if ($("fulltext-card")) {
    $("version-pick").addEventListener("change", () => showVersion(+$("version-pick").value));
    showVersion(0);
  }
  // Publish a new version (PATCH with content): the reading page tells
  // its readers the notice was updated and asks them again.
  if ($("revise")) {
    $("revise-open").addEventListener("click", () => {
      if (!current) return;
      $("revise-title").value = current.title;
      $("revise-markdown").value = current.markdown;
      $("revise-change-note").value = "";
      $("revise").hidden = false;
      $("revise-open").hidden = true;
      $("revise-markdown").focus();
    });
    $("revise-cancel").addEventListener("click", () => { $("revise").hidden = true; $("revise-open").hidden = false; });
    $("revise").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      if (!current) return;
      $("revise-error").textContent = "";
      const reack = $("revise-reack").checked;
      if (!confirm(trf(reack ? "revise.confirm_reack" : "revise.confirm", current.versions + 1))) return;
      $("revise-submit").disabled = true;
      try {
        const r = await fetch(api.replace(/\/$/, ""), { method: "PATCH", credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
          body: JSON.stringify({ title: $("revise-title").value, reacknowledge: reack,
            change_note: $("revise-change-note").value.trim(),
            content: { markdown: $("revise-markdown").value, attachments: current.attachments.map((a) => a.id) } }) });
        let j = null;
        try { j = await r.json(); } catch (_) { j = null; }
        if (!r.ok) { $("revise-error").textContent = (j && j.error) || ("HTTP " + r.status); return; }
        location.reload();
      } finally {
        $("revise-submit").disabled = false;
      }
    });
  }

  // --- departments ----------------------------------------------------
  let depts = [];
  let sortKey = null, sortDir = 1;
  // A panel says what it is doing: loading, failed (keeping the last
  // table, retrying), or empty; never a silent blank table.
  function panelState(id, text, cls) {
    const p = $(id);
    p.textContent = text || "";
    p.className = "panel-state" + (cls ? " " + cls : "");
    p.hidden = !text;
  }
  let deptsLoaded = false, deptRetry = null;
  async function loadDepartments() {
    clearTimeout(deptRetry);
    if (!deptsLoaded) panelState("departments-state", tr("state.loading"), "loading");
    try {
      const d = await getJSON(api + "/departments");
      depts = d.departments;
      deptsLoaded = true;
      renderDepartments();
      panelState("departments-state", depts.length ? "" : tr("dept.none"));
    } catch (e) {
      panelState("departments-state", tr("dept.failed") + " (" + e.message + ")", "failed");
      deptRetry = setTimeout(loadDepartments, 3000);
    }
  }
  function renderDepartments() {
    const rows = depts.slice();
    if (sortKey) {
      rows.sort((a, b) => {
        const x = a[sortKey], y = b[sortKey];
        return (typeof x === "string" ? x.localeCompare(y) : x - y) * sortDir;
      });
    }
    const tb = $("departments").tBodies[0];
    while (tb.firstChild) tb.removeChild(tb.firstChild);
    for (const d of rows) {
      const row = el("tr");
      const name = el("td", null, "dept");
      const a = el("a", (sortKey ? "" : "\u00a0\u00a0".repeat(d.depth)) + d.name);
      a.dataset.dept = d.id;
      a.addEventListener("click", () => setDepartment(d.id, d.name));
      name.appendChild(a);
      row.appendChild(name);
      row.appendChild(el("td", d.recipients, "num"));
      row.appendChild(el("td", d.read, "num"));
      row.appendChild(el("td", d.unread, "num"));
      const pc = el("td", d.percent, "num");
      const bar = el("span", null, "pbar");
      const fill = el("i");
      fill.style.width = Math.min(100, d.percent) + "%";
      bar.appendChild(fill);
      pc.appendChild(bar);
      row.appendChild(pc);
      tb.appendChild(row);
    }
  }
  for (const th of document.querySelectorAll("#departments th[data-sort]")) {
    th.addEventListener("click", () => {
      const k = th.dataset.sort;
      sortDir = sortKey === k ? -sortDir : (k === "name" ? 1 : -1);
      sortKey = k;
      for (const o of document.querySelectorAll("#departments th")) o.classList.remove("sorted-asc", "sorted-desc");
      th.classList.add(sortDir > 0 ? "sorted-asc" : "sorted-desc");
      renderDepartments();
    });
  }

  // --- recipients -----------------------------------------------------
  let department = "", cursor = "", seq = 0, pages = 0, recipientsLoaded = false, recRetry = null;
  function query(withCursor) {
    const q = new URLSearchParams();
    q.set("state", $("state").value);
    if (department) q.set("department", department);
    const s = $("search").value.trim();
    if (s) q.set("q", s);
    if (withCursor && cursor) q.set("cursor", cursor);
    return q;
  }
  // Exports: all, read or unread, of the whole notice or of the selected
  // department (with its sub-departments), as export.csv takes them.
  function updateExport() {
    for (const [id, st] of [["export-all", "all"], ["export-read", "read"], ["export", "unread"]]) {
      const q = new URLSearchParams();
      q.set("state", st);
      if (department) q.set("department", department);
      if (LANG === "zh-CN") q.set("labels", "zh-CN"); // the page's words and zone; programs get the machine's
      $(id).href = api + "/export.csv?" + q.toString();
    }
    const zq = new URLSearchParams({ state: "all" });
    if (department) zq.set("department", department);
    $("evidence-zip").href = api + "/evidence.zip?" + zq.toString();
    $("export-scope").textContent = department ? tr("dept.name") + " " + $("department-name").textContent : tr($("export-scope").dataset.whole === "export.mine" ? "export.mine" : "export.whole");
  }
  async function loadRecipients(append) {
    pages = append ? pages + 1 : 1;
    const my = ++seq;
    const q = query(append);
    q.set("limit", "100");
    let d;
    if (!append && !recipientsLoaded) panelState("recipients-state", tr("state.loading"), "loading");
    try { d = await getJSON(api + "/recipients?" + q.toString()); } catch (e) {
      if (my !== seq) return;
      panelState("recipients-state", tr("people.failed") + " (" + e.message + ")", "failed");
      clearTimeout(recRetry);
      recRetry = setTimeout(() => loadRecipients(append), 3000);
      return;
    }
    if (my !== seq) return; // a newer search replaced this one
    recipientsLoaded = true;
    panelState("recipients-state", d.items.length || append ? "" : tr("people.none"));
    const tb = $("recipients").tBodies[0];
    if (!append) while (tb.firstChild) tb.removeChild(tb.firstChild);
    $("recipient-total").textContent = d.total;
    for (const r of d.items) {
      const row = el("tr");
      row.appendChild(el("td", r.userid));
      row.appendChild(el("td", r.name + (r.left ? " (" + tr("people.left") + ")" : "")));
      row.appendChild(el("td", r.departments.map((x) => x.name || x.id).join(", "), "hide-narrow"));
      let when = r.read ? (r.read_time ? fmtTime(r.read_time) : tr("count.read")) : "–";
      // Under read_rule acknowledged: how far on the reading page.
      const states = { unopened: tr("read_state.unopened"), opened: tr("read_state.opened"), read_to_end: tr("read_state.read_to_end"), acknowledged: tr("read_state.acknowledged") };
      if (r.state && states[r.state]) when = states[r.state] + (r.read && r.read_time ? " · " + fmtTime(r.read_time) : "");
      row.appendChild(el("td", when));
      const ev = el("td");
      const link = el("a", tr("evidence.pdf"));
      link.href = api + "/evidence/" + encodeURIComponent(r.userid) + ".pdf";
      ev.appendChild(link);
      row.appendChild(ev);
      tb.appendChild(row);
    }
    cursor = d.next_cursor;
    $("more").hidden = !cursor;
  }
  function setDepartment(id, name) {
    department = String(id);
    $("department-name").textContent = name;
    $("department-filter").hidden = false;
    cursor = ""; updateExport(); loadRecipients(false);
  }
  $("department-clear").addEventListener("click", () => {
    department = ""; $("department-filter").hidden = true;
    cursor = ""; updateExport(); loadRecipients(false);
  });
  let timer = null;
  $("search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { cursor = ""; updateExport(); loadRecipients(false); }, 250);
  });
  $("state").addEventListener("change", () => { cursor = ""; updateExport(); loadRecipients(false); });
  $("filter").addEventListener("submit", (e) => e.preventDefault());
  $("more").addEventListener("click", () => loadRecipients(true));

  // --- remind ---------------------------------------------------------
  // Under read_rule acknowledged the reminder chooses whom by the reading
  // page's states (issue 49): each choice names its number (by_state of
  // GET /progress, in the caller's scope).
  const remindTargets = { unopened: "remind.target.unopened", opened: "remind.target.opened", read_to_end: "remind.target.read_to_end" };
  const remindWords = { unopened: "read_state.unopened", opened: "read_state.opened", read_to_end: "read_state.read_to_end" };
  function showStateCounts(p) {
    const sel = $("remind-state");
    if (!sel || !p || !p.by_state) return;
    for (const o of sel.options) {
      o.textContent = o.value ? trf(remindTargets[o.value], numFmt.format(p.by_state[o.value] || 0)) : trf("remind.target.all", numFmt.format(p.unread));
    }
  }
  $("remind").addEventListener("click", async () => {
    // The exact number, as the page shows it (issue 49: the question
    // named none), fetched again for the state chosen; those the server
    // leaves out are said after.
    const sel = $("remind-state");
    const st = sel ? sel.value : "";
    let unread = lastProgress ? lastProgress.unread : null;
    if (sel) {
      try {
        const p = await getJSON(api + "/progress");
        showStateCounts(p);
        unread = st ? (p.by_state ? p.by_state[st] : null) : p.unread;
      } catch (_) {
        if (st) unread = null;
      }
    }
    if (st && unread === 0) { $("remind-status").textContent = trf("remind.none", tr(remindWords[st])); return; }
    const question = st
      ? (unread === null ? trf("remind.confirm_state", tr(remindWords[st])) : trf("remind.confirm_state_n", tr(remindWords[st]), numFmt.format(unread)))
      : (unread === null ? tr("remind.confirm") : trf("remind.confirm_n", numFmt.format(unread)));
    if (!confirm(question)) return;
    const btn = $("remind");
    btn.disabled = true;
    $("remind-status").textContent = "…";
    try {
      const r = await fetch(api + "/remind", { method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: JSON.stringify(st ? { state: st } : {}) });
      const d = await r.json();
      if (r.ok) {
        let msg = trf("remind.done_n", numFmt.format(d.reminded));
        const left = unread === null ? 0 : unread - d.reminded;
        if (left > 0) msg += trf("remind.not_reminded", numFmt.format(left));
        $("remind-status").textContent = msg;
        loadReminders();
      }
      else if (r.status === 429) $("remind-status").textContent = tr("remind.too_soon") + " " + fmtTime(d.next_allowed_at);
      else $("remind-status").textContent = d.error || ("HTTP " + r.status);
    } catch (e) {
      $("remind-status").textContent = tr("action.failed");
    } finally {
      btn.disabled = false;
    }
  });

  // --- recall ---------------------------------------------------------
  $("recall").addEventListener("click", async () => {
    if (!confirm(tr("recall.confirm"))) return;
    const btn = $("recall");
    btn.disabled = true;
    $("recall-status").textContent = "…";
    try {
      const r = await fetch(api + "/recall", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
      const d = await r.json();
      if (r.ok) {
        $("recall-status").textContent = tr("state.recalled_at");
        location.reload();
        return;
      }
      $("recall-status").textContent = d.error || ("HTTP " + r.status);
    } catch (e) {
      $("recall-status").textContent = tr("action.failed");
    }
    btn.disabled = false;
  });

  updateExport();
  loadDepartments();
  loadRecipients(false);
});

// The list page's notices not sent yet: a held notice (too late to send
// on its own) is sent or cancelled by a person, a scheduled notice or a
// draft cancelled. Nothing is sent by a single click: the audience's
// count now (the audience preview, what the send will snapshot) is
// confirmed, and typed above the app's confirm_over.
catalogueReady.then(function () {
  const pending = document.getElementById("pending");
  if (!pending) return;
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  async function call(method, url, body) {
    const headers = { "Accept": "application/json", "X-CSRF-Token": csrf };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const r = await fetch(url, { method, credentials: "same-origin", headers, body: body === undefined ? undefined : JSON.stringify(body) });
    if (r.status === 401) { location.href = "/login"; throw new Error("signed out"); }
    let j = null;
    try { j = await r.json(); } catch (e) { /* no JSON body */ }
    if (!r.ok) throw new Error((j && j.error) || "HTTP " + r.status);
    return j;
  }
  async function confirmSend(n) {
    const [apps, pv] = await Promise.all([
      call("GET", "/api/v1/apps"),
      call("POST", "/api/v1/audience/preview", { app: n.app, audience: n.audience }),
    ]);
    const app = (apps.apps || []).find((a) => a.name === n.app);
    const count = pv.recipients;
    const text = tr("notice.confirm_send").replace("{n}", count.toLocaleString("en-US"));
    if (app && count > app.confirm_over) {
      const typed = window.prompt(text + "\n" + tr("notice.type_count"));
      if (typed === null) return false;
      if (typed.replace(/[,\s]/g, "") !== String(count)) throw new Error(tr("notice.count_mismatch"));
      return true;
    }
    return window.confirm(text);
  }
  pending.addEventListener("click", async (ev) => {
    const btn = ev.target.closest("button.notice-send, button.notice-cancel, button.notice-nudge, button.notice-withdraw");
    if (!btn) return;
    const li = btn.closest("li.notice");
    const out = li.querySelector(".notice-error");
    const api = "/api/v1/messages/" + encodeURIComponent(li.dataset.msgid);
    out.textContent = "";
    btn.disabled = true;
    try {
      if (btn.classList.contains("notice-nudge")) {
        await call("POST", api + "/approval/nudge");
        out.textContent = tr("approval.nudged");
        return;
      } else if (btn.classList.contains("notice-withdraw")) {
        if (!window.confirm(tr("approval.withdraw_confirm"))) return;
        await call("POST", api + "/approval/withdraw");
      } else if (btn.classList.contains("notice-send")) {
        if (!(await confirmSend(await call("GET", api)))) return;
        await call("POST", api + "/send");
      } else {
        if (!window.confirm(tr("notice.confirm_cancel"))) return;
        await call("POST", api + "/cancel");
      }
      location.reload();
    } catch (e) {
      out.textContent = e.message;
    } finally {
      btn.disabled = false;
    }
  });
});
