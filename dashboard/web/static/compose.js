// yidu compose page (/new). Plain JS, no build step; data is written with
// textContent and DOM nodes only. Everything goes through the API the page
// shares with programs: /api/v1/apps, the directory, the audience preview
// and POST/PATCH /api/v1/messages (docs/api.md).
"use strict";

(function () {
  const form = document.getElementById("compose");
  if (!form) return;
  const $ = (id) => document.getElementById(id);
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const limits = { title: +form.dataset.maxTitle, body: +form.dataset.maxBody, url: +form.dataset.maxUrl };
  const params = new URLSearchParams(location.search);
  const editID = params.get("edit") || "";
  const fromID = params.get("from") || "";
  const templateID = params.get("template") || "";
  const numFmt = new Intl.NumberFormat(LANG); // grouped digits in the page language (app.js LANG)
  const viewerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;

  const state = {
    apps: [], app: null,
    depts: new Map(), // id -> {id, parent_id, name, members, children: []}
    roots: [],
    tags: new Map(),
    pickedDepts: new Set(), pickedTags: new Set(),
    people: new Map(), // userid -> label
    pasted: new Set(),
    all: false,
    recipients: null, // the last preview's count for the current audience
    editing: null, // the notice being edited (?edit=)
  };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function debounce(fn, ms) {
    let t = 0;
    return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  }

  // api calls path with a JSON body (or none) and returns [status, json].
  async function api(method, path, body) {
    const h = { "Accept": "application/json" };
    if (body !== undefined) h["Content-Type"] = "application/json";
    if (method !== "GET") h["X-CSRF-Token"] = csrf;
    const r = await fetch(path, { method, credentials: "same-origin", headers: h,
      body: body === undefined ? undefined : JSON.stringify(body) });
    if (r.status === 401) { location.href = "/login"; throw new Error("signed out"); }
    let j = null;
    try { j = await r.json(); } catch (_) { j = null; }
    return [r.status, j];
  }
  async function getJSON(path) {
    const [code, j] = await api("GET", path);
    if (code !== 200) throw new Error((j && j.error) || "HTTP " + code);
    return j;
  }
  const appQ = () => "app=" + encodeURIComponent(state.app ? state.app.name : "");

  // ---- Fields, their counts against the card's limits, and their errors.
  const chars = (s) => [...s].length; // code points, as Validate counts
  const bytes = (s) => new TextEncoder().encode(s).length;
  const fields = [
    ["title", () => chars($("title").value), limits.title],
    ["body", () => chars($("body").value), limits.body],
    ["url", () => bytes($("url").value), limits.url],
  ];
  function showCounts() {
    for (const [id, count, max] of fields) {
      const n = count();
      const c = $(id + "-count");
      c.textContent = n + " / " + max;
      c.classList.toggle("over", n > max);
      $(id).setAttribute("aria-invalid", n > max ? "true" : "false");
    }
  }
  function clearErrors() {
    for (const e of form.querySelectorAll(".field-error")) e.textContent = "";
  }
  const fieldBox = { app: "app", title: "title", body: "body", url: "url", send_at: "send_at",
    audience: "audience", userids: "audience", departments: "audience", tags: "audience", all: "audience",
    follow_up: "follow_up", content: "content", "content.markdown": "content", "content.attachments": "content",
    read_rule: "read_rule", min_read_seconds: "read_rule", standing: "standing" };
  // showError puts the API's {"error","field"} beside its field.
  function showError(j, fallback) {
    const msg = (j && j.error) || fallback;
    let f = j && j.field ? String(j.field) : "";
    if (f.startsWith("audience")) f = "audience";
    if (f.startsWith("follow_up")) f = "follow_up";
    if (f.startsWith("standing")) f = "standing";
    const box = $((fieldBox[f] || "form") + "-error");
    box.textContent = msg;
    box.scrollIntoView({ block: "center" });
  }
  // checkLocal finds what the server would refuse without asking it.
  function checkLocal() {
    let ok = true;
    for (const [id, count, max] of fields) {
      if (count() > max) {
        $(id + "-error").textContent = trf(id === "url" ? "compose.err_url_max" : "compose.err_text_max", max, count());
        ok = false;
      }
    }
    if ($("title").value.trim() === "") { $("title-error").textContent = tr("compose.err_title"); ok = false; }
    const u = $("url").value.trim();
    if (u !== "" && !/^https?:\/\/[^\s]+$/i.test(u)) { $("url-error").textContent = tr("compose.err_url_scheme"); ok = false; }
    return ok;
  }

  // ---- The card as WeCom shows it on a phone.
  function showPreview() {
    $("pv-app").textContent = state.app ? state.app.name : "";
    const t = $("title").value;
    $("pv-title").textContent = t || tr("compose.title");
    $("pv-title").classList.toggle("placeholder", !t);
    $("pv-body").textContent = $("body").value;
    $("pv-body").hidden = $("body").value === "";
    $("pv-link").hidden = $("url").value.trim() === "";
  }
  for (const id of ["title", "body", "url"]) {
    $(id).addEventListener("input", () => { showCounts(); showPreview(); $(id + "-error").textContent = ""; });
  }

  // ---- Apps.
  async function loadApps() {
    const j = await getJSON("/api/v1/apps");
    state.apps = j.apps || [];
    const sel = $("app");
    sel.replaceChildren();
    for (const a of state.apps) {
      const o = el("option", a.name);
      o.value = a.name;
      sel.append(o);
    }
    if (state.apps.length === 0) {
      $("app-error").textContent = tr("compose.no_apps");
      $("submit").disabled = true;
      $("save-draft").disabled = true;
    }
  }
  async function selectApp(name) {
    const prev = state.app;
    state.app = state.apps.find((a) => a.name === name) || state.apps[0] || null;
    if (!state.app) return;
    $("app").value = state.app.name;
    if (prev && prev.corp_id !== state.app.corp_id) {
      // Department, tag and UserIDs are a corp's own.
      state.pickedDepts.clear(); state.pickedTags.clear(); state.people.clear(); state.pasted.clear();
    }
    showZone();
    showPreview();
    fuApp();
    await Promise.all([loadDepts(), loadTags(), loadTemplates()]);
    showPicked();
    refreshCount();
  }
  $("app").addEventListener("change", () => selectApp($("app").value));

  // ---- Departments: the tree, with counts of the whole subtree.
  async function loadDepts() {
    $("dept-state").hidden = false;
    $("dept-state").textContent = tr("compose.dept_loading");
    try {
      const j = await getJSON("/api/v1/directory/departments?" + appQ());
      // A sender kept to an audience may not pick everyone (issue 41).
      const everyone = j.everyone !== false;
      $("all").closest("label").hidden = !everyone;
      if (!everyone && state.all) { $("all").checked = false; $("all").dispatchEvent(new Event("change")); }
      state.depts = new Map();
      for (const d of j.departments || []) state.depts.set(d.id, { ...d, children: [] });
      state.roots = [];
      for (const d of state.depts.values()) {
        const p = state.depts.get(d.parent_id);
        if (p && p !== d) p.children.push(d); else state.roots.push(d);
      }
      $("dept-state").hidden = state.depts.size > 0;
      $("dept-state").textContent = tr("compose.dept_none");
      renderTree();
    } catch (e) {
      $("dept-state").textContent = trf("compose.dept_failed", e.message);
    }
  }
  function deptNode(d, open, only) {
    const li = el("li");
    li.dataset.dept = d.id;
    const row = el("div", null, "node");
    const kids = only ? d.children.filter((c) => only.has(c.id)) : d.children;
    const tw = el("button", kids.length ? (open ? "▾" : "▸") : "", "twisty");
    tw.type = "button";
    tw.disabled = kids.length === 0;
    tw.setAttribute("aria-label", open ? tr("compose.collapse") : tr("compose.expand"));
    tw.setAttribute("aria-expanded", open ? "true" : "false");
    const lab = el("label");
    const cb = el("input");
    cb.type = "checkbox";
    cb.dataset.dept = d.id;
    cb.checked = state.pickedDepts.has(d.id);
    lab.append(cb, " ", el("span", d.name, "name"));
    row.append(tw, lab, el("span", trf("compose.people_n", numFmt.format(d.members || 0)), "count"));
    li.append(row);
    const ul = el("ul");
    ul.hidden = !open;
    li.append(ul);
    const fill = () => { if (!ul.firstChild) for (const c of kids) ul.append(deptNode(c, only !== null, only)); };
    if (open) fill();
    tw.addEventListener("click", () => {
      fill();
      ul.hidden = !ul.hidden;
      tw.textContent = ul.hidden ? "▸" : "▾";
      tw.setAttribute("aria-expanded", ul.hidden ? "false" : "true");
      tw.setAttribute("aria-label", ul.hidden ? tr("compose.expand") : tr("compose.collapse"));
    });
    cb.addEventListener("change", () => {
      if (cb.checked) state.pickedDepts.add(d.id); else state.pickedDepts.delete(d.id);
      audienceChanged();
    });
    return li;
  }
  function renderTree() {
    const q = $("dept-search").value.trim().toLowerCase();
    const ul = $("dept-tree");
    ul.replaceChildren();
    if (!q) {
      for (const r of state.roots) ul.append(deptNode(r, true, null));
      return;
    }
    // Matches and their ancestors, opened down to the matches.
    const only = new Set();
    let n = 0;
    for (const d of state.depts.values()) {
      if (!d.name.toLowerCase().includes(q)) continue;
      if (++n > 200) break;
      for (let x = d; x && !only.has(x.id); x = state.depts.get(x.parent_id)) only.add(x.id);
    }
    for (const r of state.roots) if (only.has(r.id)) ul.append(deptNode(r, true, only));
    if (only.size === 0) ul.append(el("li", tr("compose.dept_no_match"), "muted"));
  }
  $("dept-search").addEventListener("input", debounce(renderTree, 150));

  // ---- Tags, kept apart from departments.
  async function loadTags() {
    $("tags-state").hidden = false;
    $("tags-state").textContent = tr("compose.tags_loading");
    try {
      const j = await getJSON("/api/v1/directory/tags?" + appQ());
      state.tags = new Map((j.tags || []).map((t) => [t.id, t]));
      const ul = $("tags");
      ul.replaceChildren();
      for (const t of state.tags.values()) {
        const li = el("li");
        const lab = el("label", null, "check");
        const cb = el("input");
        cb.type = "checkbox";
        cb.dataset.tag = t.id;
        cb.checked = state.pickedTags.has(t.id);
        cb.addEventListener("change", () => {
          if (cb.checked) state.pickedTags.add(t.id); else state.pickedTags.delete(t.id);
          audienceChanged();
        });
        lab.append(cb, " ", el("span", t.name, "name"), " ", el("span", trf("compose.people_n", numFmt.format(t.members || 0)), "count"));
        li.append(lab);
        ul.append(li);
      }
      $("tags-state").hidden = state.tags.size > 0;
      $("tags-state").textContent = tr("compose.tags_none");
    } catch (e) {
      $("tags-state").textContent = trf("compose.tags_failed", e.message);
    }
  }

  // ---- People, found by name or UserID as one types.
  let peopleSeq = 0;
  const searchPeople = debounce(async () => {
    const q = $("people-q").value.trim();
    const seq = ++peopleSeq;
    const ul = $("people-results");
    if (!q) { ul.replaceChildren(); return; }
    try {
      const j = await getJSON("/api/v1/directory/people?" + appQ() + "&limit=20&q=" + encodeURIComponent(q));
      if (seq !== peopleSeq) return; // a later search answers
      ul.replaceChildren();
      for (const p of j.people || []) {
        const b = el("button", null, "person");
        b.type = "button";
        b.dataset.userid = p.userid;
        b.append(el("span", p.name || p.userid, "name"), " ", el("span", p.userid, "muted"));
        b.addEventListener("click", () => {
          state.people.set(p.userid, p.name ? p.name + "（" + p.userid + "）" : p.userid);
          audienceChanged();
          b.disabled = true;
        });
        b.disabled = state.people.has(p.userid);
        const li = el("li");
        li.append(b);
        ul.append(li);
      }
      if (!ul.firstChild) ul.append(el("li", tr("compose.people_none"), "muted"));
    } catch (e) {
      if (seq === peopleSeq) ul.replaceChildren(el("li", trf("compose.people_failed", e.message), "error"));
    }
  }, 250);
  $("people-q").addEventListener("input", searchPeople);

  // ---- A pasted list or a CSV of UserIDs: one a line, the first column.
  function parseList(text) {
    const out = [];
    const lines = text.replace(/^\uFEFF/, "").split(/\r\n|\n|\r/);
    for (let i = 0; i < lines.length; i++) {
      let s = lines[i].trim();
      if (s.startsWith('"')) {
        const end = s.indexOf('"', 1);
        s = end > 0 ? s.slice(1, end) : s.slice(1);
      } else {
        s = s.split(/[,;\t]/)[0];
      }
      s = s.trim();
      if (s === "") continue;
      if (i === 0 && /^(userid|user_id|\u8d26\u53f7|\u5e10\u53f7)$/i.test(s)) continue; // a header
      out.push(s);
    }
    return out;
  }
  function addList(ids, source) {
    const before = state.pasted.size;
    for (const id of ids) state.pasted.add(id);
    $("paste-status").textContent = trf("compose.list_added", source, numFmt.format(ids.length), numFmt.format(state.pasted.size - before));
    audienceChanged();
  }
  $("paste-add").addEventListener("click", () => {
    addList(parseList($("paste").value), tr("compose.source_paste"));
    $("paste").value = "";
  });
  $("csv").addEventListener("change", async () => {
    const f = $("csv").files[0];
    $("csv").value = "";
    if (!f) return;
    $("audience-error").textContent = "";
    const buf = new Uint8Array(await f.arrayBuffer());
    let text = "";
    try {
      if (buf.subarray(0, 8192).includes(0)) throw new Error("binary");
      text = new TextDecoder("utf-8", { fatal: true }).decode(buf);
    } catch (_) {
      $("audience-error").textContent = trf("compose.not_text", f.name);
      return;
    }
    addList(parseList(text), f.name);
  });
  $("all").addEventListener("change", () => {
    state.all = $("all").checked;
    $("audience-parts").classList.toggle("dimmed", state.all);
    audienceChanged();
  });

  // ---- What was picked, and the live count.
  function audience() {
    const a = {
      userids: [...new Set([...state.people.keys(), ...state.pasted])],
      departments: [...state.pickedDepts],
      all: state.all,
    };
    // "tags" only when some are picked: a server without tags takes the rest.
    if (state.pickedTags.size > 0) a.tags = [...state.pickedTags];
    return a;
  }
  const isEmpty = (a) => !a.all && a.userids.length === 0 && a.departments.length === 0 && !(a.tags && a.tags.length);
  function chip(label, kind, onRemove) {
    const li = el("li", null, "chip " + kind);
    li.append(el("span", label));
    const x = el("button", "×", "remove");
    x.type = "button";
    x.setAttribute("aria-label", trf("compose.remove", label));
    x.addEventListener("click", onRemove);
    li.append(x);
    return li;
  }
  function showPicked() {
    const ul = $("picked");
    ul.replaceChildren();
    if (state.all) ul.append(chip(tr("compose.everyone"), "all", () => { $("all").checked = false; $("all").dispatchEvent(new Event("change")); }));
    for (const id of state.pickedDepts) {
      const d = state.depts.get(id);
      ul.append(chip(trf("compose.chip_dept", d ? d.name : "#" + id), "dept", () => { state.pickedDepts.delete(id); renderTree(); audienceChanged(); }));
    }
    for (const id of state.pickedTags) {
      const t = state.tags.get(id);
      ul.append(chip(trf("compose.chip_tag", t ? t.name : "#" + id), "tag", () => {
        state.pickedTags.delete(id);
        const cb = form.querySelector('input[data-tag="' + id + '"]');
        if (cb) cb.checked = false;
        audienceChanged();
      }));
    }
    for (const [u, label] of state.people) {
      ul.append(chip(label, "person", () => { state.people.delete(u); audienceChanged(); }));
    }
    if (state.pasted.size > 0) {
      ul.append(chip(trf("compose.chip_list", numFmt.format(state.pasted.size)), "list", () => { state.pasted.clear(); $("paste-status").textContent = ""; audienceChanged(); }));
    }
    if (!ul.firstChild) ul.append(el("li", tr("compose.none_picked"), "muted"));
  }
  let countSeq = 0;
  const refreshCount = debounce(async () => {
    const a = audience();
    const seq = ++countSeq;
    state.recipients = null;
    if (isEmpty(a) || !state.app) {
      $("recipient-count").textContent = "0";
      $("left-count").textContent = "";
      $("count-state").textContent = "";
      $("unknown").hidden = true;
      state.recipients = 0;
      return;
    }
    $("count-state").textContent = tr("compose.counting");
    try {
      const [code, j] = await api("POST", "/api/v1/audience/preview", { app: state.app.name, audience: a });
      if (seq !== countSeq) return;
      if (code !== 200) { $("count-state").textContent = ""; showError(j, tr("compose.count_failed")); return; }
      state.recipients = j.recipients;
      $("recipient-count").textContent = numFmt.format(j.recipients);
      $("left-count").textContent = j.left ? trf("compose.left_n", numFmt.format(j.left)) : "";
      $("count-state").textContent = "";
      const unk = j.unknown_userids || [];
      $("unknown").hidden = unk.length === 0;
      $("unknown-count").textContent = numFmt.format(unk.length);
      const ul = $("unknown-list");
      ul.replaceChildren();
      for (const u of unk.slice(0, 200)) ul.append(el("li", u, "chip unknown"));
      if (unk.length > 200) ul.append(el("li", trf("compose.more_n", numFmt.format(unk.length - 200)), "muted"));
    } catch (e) {
      if (seq === countSeq) $("count-state").textContent = trf("compose.count_error", e.message);
    }
  }, 300);
  function audienceChanged() {
    $("audience-error").textContent = "";
    state.recipients = null;
    $("count-state").textContent = tr("compose.counting");
    showPicked();
    refreshCount();
  }

  // ---- When: now, or a time in the corp's zone (the app's timezone).
  const corpZone = () => (state.app && state.app.timezone) || "Asia/Shanghai";
  function partsIn(tz, ms) {
    const f = new Intl.DateTimeFormat("en-US", { timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit",
      day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" });
    const g = {};
    for (const p of f.formatToParts(new Date(ms))) g[p.type] = p.value;
    return { y: +g.year, mo: +g.month, d: +g.day, h: +g.hour % 24, mi: +g.minute, s: +g.second };
  }
  // offsetIn is tz's offset from UTC at the instant ms, in minutes.
  function offsetIn(tz, ms) {
    const p = partsIn(tz, ms);
    return Math.round((Date.UTC(p.y, p.mo - 1, p.d, p.h, p.mi, p.s) - Math.floor(ms / 1000) * 1000) / 60000);
  }
  // fromWall reads "2026-12-03T18:05" as a time in tz: {ms, offset}.
  function fromWall(wall, tz) {
    const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})/.exec(wall);
    if (!m) return null;
    const guess = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5]);
    let off = offsetIn(tz, guess);
    let ms = guess - off * 60000;
    const off2 = offsetIn(tz, ms);
    if (off2 !== off) { off = off2; ms = guess - off * 60000; }
    return { ms, offset: off };
  }
  const pad = (n) => String(n).padStart(2, "0");
  function toWall(ms, tz) {
    const p = partsIn(tz, ms);
    return p.y + "-" + pad(p.mo) + "-" + pad(p.d) + "T" + pad(p.h) + ":" + pad(p.mi);
  }
  function rfc3339(ms, offset) {
    const p = new Date(ms + offset * 60000);
    const a = Math.abs(offset);
    return p.getUTCFullYear() + "-" + pad(p.getUTCMonth() + 1) + "-" + pad(p.getUTCDate()) + "T" + pad(p.getUTCHours()) + ":" +
      pad(p.getUTCMinutes()) + ":" + pad(p.getUTCSeconds()) + (offset < 0 ? "-" : "+") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
  }
  // zhTime is a date and time in tz, in the catalogue form compose.date
  // (zh-CN: year, month and day words; en: 2026-12-03 18:05).
  function zhTime(ms, tz) {
    const p = partsIn(tz, ms);
    return trf("compose.date", p.y, LANG === "en" ? pad(p.mo) : p.mo, LANG === "en" ? pad(p.d) : p.d, pad(p.h), pad(p.mi));
  }
  function sameZone(ms) { return offsetIn(corpZone(), ms) === offsetIn(viewerZone, ms); }
  function showZone() {
    $("send-at-zone").textContent = trf("compose.corp_zone", corpZone());
    const w = $("send-at").value ? fromWall($("send-at").value, corpZone()) : null;
    $("send-at-local").textContent = w && !sameZone(w.ms) ? trf("compose.your_zone", viewerZone, zhTime(w.ms, viewerZone)) : "";
    const later = $("when-later").checked;
    $("later").hidden = !later;
    $("submit").textContent = later ? tr("compose.schedule_btn") : tr("compose.send_btn");
  }
  for (const id of ["when-now", "when-later"]) $(id).addEventListener("change", () => {
    if ($("when-later").checked && !$("send-at").value) {
      // A default a little ahead, on the minute, in the corp's zone.
      $("send-at").value = toWall(Date.now() + 60 * 60000, corpZone());
    }
    $("send_at-error").textContent = "";
    showZone();
  });
  $("send-at").addEventListener("input", () => { $("send_at-error").textContent = ""; showZone(); });
  // sendAt is the chosen time as RFC 3339 in the corp's zone, or "".
  function sendAt() {
    if (!$("when-later").checked) return "";
    const v = $("send-at").value;
    if (!v) return null;
    // datetime-local may carry seconds (a test sets them): keep them.
    const w = fromWall(v, corpZone());
    if (!w) return null;
    const sec = /T\d{2}:\d{2}:(\d{2})/.exec(v);
    if (sec) w.ms += +sec[1] * 1000;
    return rfc3339(w.ms, w.offset);
  }

  // ---- Follow-up policy (issue 30): a preset fills the fields; editing
  // one makes it custom. "app" is the app's default (apps[].follow_up),
  // the first choice of a new notice of an app that has one. The "none"
  // preset posts "follow_up": null: a POST without it gets the default.
  const fuPresets = {
    standard: { reminders: ["2h", "next 09:30"], escalate_after: 2, working_hours: "09:00-19:00", working_days: "mon-fri" },
    urgent: { reminders: ["30m", "2h"], escalate_after: 1 },
  };
  function fuMode() {
    const r = form.querySelector('input[name="fu"]:checked');
    return r ? r.value : "none";
  }
  function fuFill(p) {
    $("fu-reminders").value = (p.reminders || []).join(", ");
    $("fu-escalate").value = String(p.escalate_after || 0);
    $("fu-deadline").value = p.deadline ? toWall(Date.parse(p.deadline), corpZone()) : "";
    $("fu-hours").value = p.working_hours || "";
    $("fu-days").value = p.working_days || "";
  }
  // followUp is the policy the fields say, or null for the "none" preset.
  function followUp() {
    if (fuMode() === "none") return null;
    const p = { reminders: $("fu-reminders").value.split(/[,，]/).map((s) => s.trim()).filter((s) => s !== "") };
    const k = parseInt($("fu-escalate").value, 10);
    if (k > 0) p.escalate_after = k;
    if ($("fu-deadline").value) {
      const w = fromWall($("fu-deadline").value, corpZone());
      if (w) p.deadline = rfc3339(w.ms, w.offset);
    }
    if ($("fu-hours").value.trim()) p.working_hours = $("fu-hours").value.trim();
    if ($("fu-days").value.trim()) p.working_days = $("fu-days").value.trim();
    return p;
  }
  function fuShow() {
    const mode = fuMode();
    $("fu-fields").hidden = mode === "none";
    const p = followUp();
    $("fu-summary").textContent = p ? trf("compose.fu_summary", p.reminders.length) +
      (p.escalate_after ? trf("compose.fu_summary_escalate", p.escalate_after) : "") : "";
  }
  // fuApp offers the app's default, and picks it for a new notice.
  function fuApp() {
    const def = state.app && state.app.follow_up;
    $("fu-app-label").hidden = !def;
    if (def) fuPresets.app = def; else delete fuPresets.app;
    if (state.editing || state.fuPrefilled) return; // the notice's own policy, or none
    if (def) { $("fu-app").checked = true; fuFill(def); }
    else if (fuMode() === "app") $("fu-none").checked = true;
    fuShow();
  }
  for (const r of form.querySelectorAll('input[name="fu"]')) r.addEventListener("change", () => {
    if (fuPresets[fuMode()]) fuFill(fuPresets[fuMode()]);
    $("follow_up-error").textContent = "";
    fuShow();
  });
  for (const id of ["fu-reminders", "fu-escalate", "fu-deadline", "fu-hours", "fu-days"]) $(id).addEventListener("input", () => {
    $("fu-custom").checked = true;
    $("follow_up-error").textContent = "";
    fuShow();
  });

  // ---- The full text (issue 39): Markdown with a live preview rendered
  // by the server's own renderer (POST /api/v1/content/preview), the
  // attachments uploaded one by one (POST /api/v1/attachments), the read
  // rule. A draft or scheduled notice keeps them, and they are published
  // as version 1 when it is sent (docs/api.md).
  const atts = []; // {id, sha256, name, type, size}, in order
  const maxAttachments = 10;
  function hasContent() { return $("markdown").value.trim() !== "" || atts.length > 0; }
  function sizeText(n) { return n >= 1048576 ? (n / 1048576).toFixed(1) + " MB" : Math.max(1, Math.round(n / 1024)) + " KB"; }
  function showAttachments() {
    for (const ul of [$("attachment-list"), $("pv-attachments")]) ul.replaceChildren();
    atts.forEach((a, i) => {
      const li = el("li", null, "attachment");
      li.append(el("span", a.name, "name"), el("span", sizeText(a.size), "muted"));
      const rm = el("button", tr("compose.attach_remove"), "light small");
      rm.type = "button";
      rm.addEventListener("click", () => { atts.splice(i, 1); showAttachments(); contentChanged(); });
      li.append(rm);
      $("attachment-list").append(li);
      $("pv-attachments").append(el("li", a.name + " · " + sizeText(a.size)));
    });
  }
  const renderPreview = debounce(async () => {
    const md = $("markdown").value;
    if (md.trim() === "") { $("pv-content").replaceChildren(); return; }
    try {
      const [code, j] = await api("POST", "/api/v1/content/preview", { markdown: md });
      if (code !== 200) { $("content-error").textContent = (j && j.error) || "HTTP " + code; return; }
      $("content-error").textContent = "";
      // Sanitized by the server (bluemonday's allow-list): no script,
      // image or event handler; the page's CSP forbids inline script too.
      $("pv-content").replaceChildren(...new DOMParser().parseFromString(j.html, "text/html").body.childNodes);
    } catch (_) { /* the next keystroke tries again */ }
  }, 300);
  function contentChanged() {
    const on = hasContent();
    $("reading-preview").hidden = !on;
    $("pv-reading-title").textContent = $("title").value;
    $("markdown-count").textContent = bytes($("markdown").value) > 1024 ? Math.ceil(bytes($("markdown").value) / 1024) + " / 200 KB" : "";
    renderPreview();
  }
  $("markdown").addEventListener("input", contentChanged);
  $("title").addEventListener("input", () => { $("pv-reading-title").textContent = $("title").value; });
  $("attachment-file").addEventListener("change", async (ev) => {
    const files = [...ev.target.files];
    ev.target.value = "";
    $("content-error").textContent = "";
    for (const f of files) {
      if (atts.length >= maxAttachments) { $("content-error").textContent = tr("compose.attach_max"); break; }
      $("attachment-status").textContent = trf("compose.attach_uploading", f.name);
      const fd = new FormData();
      fd.append("file", f, f.name);
      try {
        const r = await fetch("/api/v1/attachments?" + appQ(), { method: "POST", credentials: "same-origin",
          headers: { "Accept": "application/json", "X-CSRF-Token": csrf }, body: fd });
        let j = null;
        try { j = await r.json(); } catch (_) { j = null; }
        if (r.status !== 201) { $("content-error").textContent = trf("compose.attach_failed", f.name, (j && j.error) || "HTTP " + r.status); continue; }
        atts.push(j);
      } catch (e) {
        $("content-error").textContent = trf("compose.attach_failed", f.name, e.message);
      }
    }
    $("attachment-status").textContent = "";
    showAttachments();
    contentChanged();
  });
  // A standing notice is sent now or at its time, never kept as a draft
  // (campaign refuses one not sent: its joiners are sent its card), so
  // the save-draft button is off while the standing box is ticked, with a
  // line saying why; it stays off while the page is busy or cannot save
  // (submit off too).
  function showStandingDraft() {
    const standing = $("standing").checked;
    $("save-draft").disabled = standing || $("submit").disabled;
    $("save-draft").title = standing ? tr("compose.standing_no_draft") : "";
    $("standing-no-draft").hidden = !standing;
  }
  $("standing").addEventListener("change", () => {
    $("standing-fields").hidden = !$("standing").checked;
    showStandingDraft();
  });
  // contentBody adds the full text, attachments and read rule to a POST
  // body when the notice has any.
  function contentBody(b) {
    if (!hasContent()) return b;
    b.content = { markdown: $("markdown").value, attachments: atts.map((a) => a.id) };
    b.read_rule = $("read-rule").value;
    b.min_read_seconds = Math.max(0, Math.floor(+$("min-read").value || 0));
    return b;
  }

  // ---- Saving: a draft, or a confirmed send (now or scheduled).
  // body is POST /api/v1/messages' body: the fields and extra (send,
  // send_at, draft).
  function body(extra) {
    const b = Object.assign({ app: state.app ? state.app.name : "", title: $("title").value, body: $("body").value,
      url: $("url").value.trim(), audience: audience() }, extra);
    b.follow_up = followUp(); // null: none, not the app's default
    if ($("standing").checked) {
      // A standing notice (issue 51): joiners of the audience are sent it.
      b.standing = { join_deadline: $("join-deadline").value };
      if ($("reack-every").value) b.standing.reacknowledge_every = $("reack-every").value;
    }
    return contentBody(b);
  }
  // patch is PATCH's body: the same fields but the app (a notice keeps
  // its app) and a schedule: send_at, or draft.
  function patch(extra) {
    const b = { title: $("title").value, body: $("body").value, url: $("url").value.trim(), audience: audience() };
    if (extra.draft) b.draft = true;
    else if (extra.send_at) { b.send_at = extra.send_at; b.draft = false; }
    else b.draft = true; // sent now: kept unscheduled, then POST /send
    if (extra.draft && extra.send_at) b.send_at = extra.send_at;
    const fu = followUp();
    if (fu) b.follow_up = fu;
    if (hasContent()) {
      delete b.url; // a notice with full text links to its reading page
      b.content = { markdown: $("markdown").value, attachments: atts.map((a) => a.id) };
      b.read_rule = $("read-rule").value;
      b.min_read_seconds = Math.max(0, Math.floor(+$("min-read").value || 0));
    }
    return b;
  }
  function busy(on) {
    for (const id of ["submit", "save-draft", "confirm-ok", "cancel-notice"]) $(id).disabled = on;
    if (!on) showStandingDraft();
  }
  async function save(extra, sendNow) {
    if (state.editing && state.editing.content && !hasContent()) {
      // A PATCH keeps a draft's full text when it carries none: clearing
      // the text here would silently keep the old one (docs/api.md).
      $("form-error").textContent = tr("compose.content_kept");
      hideConfirm();
      return;
    }
    busy(true);
    $("save-status").textContent = tr("compose.saving");
    try {
      let code, j;
      if (state.editing) {
        const path = "/api/v1/messages/" + encodeURIComponent(state.editing.msgid);
        [code, j] = await api("PATCH", path, patch(extra));
        if (code === 200 && sendNow) [code, j] = await api("POST", path + "/send");
      } else {
        [code, j] = await api("POST", "/api/v1/messages", body(extra));
      }
      if (code === 202) {
        // Held for approval (apps[].approval): saved, not failed. The
        // approval page shows who approves and lets the author nudge them.
        $("save-status").textContent = tr("compose.held_for_approval");
        const id = (j && j.msgid) || (state.editing && state.editing.msgid);
        location.href = id ? "/approve/" + encodeURIComponent(id) : "/";
        return;
      }
      if (code !== 200 && code !== 201) {
        $("save-status").textContent = "";
        hideConfirm();
        showError(j, trf("compose.save_http", code));
        return;
      }
      $("save-status").textContent = tr("compose.saved");
      const st = j && j.state;
      location.href = st === "draft" || st === "scheduled" ? "/" : "/m/" + encodeURIComponent(j.msgid);
    } catch (e) {
      $("save-status").textContent = "";
      $("form-error").textContent = trf("compose.save_failed", e.message);
    } finally {
      busy(false);
    }
  }
  $("save-draft").addEventListener("click", () => {
    if ($("standing").checked) return; // never a standing draft (showStandingDraft)
    clearErrors();
    const at = sendAt();
    save(at ? { draft: true, send_at: at } : { draft: true }, false);
  });

  let pending = null;
  function hideConfirm() { $("confirm").hidden = true; pending = null; }
  // approvalNeed asks the server whether this notice needs approval and
  // who gives it ({needed, approvers, role}); null when it cannot say.
  async function approvalNeed() {
    try {
      const b = { app: state.app.name, audience: audience() };
      if (hasContent()) b.read_rule = $("read-rule").value;
      const [code, j] = await api("POST", "/api/v1/audience/preview", b);
      return code === 200 && j ? j.approval : null;
    } catch (_) {
      return null;
    }
  }
  // approverWords are the approvers' names in the page's list form, with
  // the role whose holders approve after them.
  function approverWords(ap) {
    const names = (ap.approvers || []).slice();
    if (ap.role === "admin") names.push(tr("compose.approver_role.admin"));
    if (ap.role === "sender") names.push(tr("compose.approver_role.sender"));
    return names.join(tr("compose.list_sep"));
  }
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    clearErrors();
    if (!checkLocal()) return;
    const a = audience();
    if (isEmpty(a)) { $("audience-error").textContent = tr("compose.err_audience"); return; }
    if (state.recipients === null) { $("audience-error").textContent = tr("compose.err_counting"); refreshCount(); return; }
    if (state.recipients === 0) { $("audience-error").textContent = tr("compose.err_nobody"); return; }
    const at = sendAt();
    if (at === null) { $("send_at-error").textContent = tr("compose.err_send_at"); return; }
    const n = state.recipients;
    const ap = await approvalNeed();
    const needs = !!(ap && ap.needed);
    $("confirm-approval").hidden = !needs;
    $("confirm-approval").textContent = needs ? trf("compose.confirm_approval", approverWords(ap)) : "";
    $("confirm-ok").textContent = tr(needs ? "compose.confirm_ok_approval" : "compose.confirm_ok");
    pending = at ? { send: true, send_at: at } : { send: true };
    $("confirm-text").textContent = trf("compose.confirm", numFmt.format(n));
    if (at) {
      const ms = Date.parse(at);
      let when = trf("compose.confirm_at", zhTime(ms, corpZone()), corpZone());
      if (!sameZone(ms)) when += trf("compose.confirm_at_yours", zhTime(ms, viewerZone));
      $("confirm-when").textContent = when + tr("compose.confirm_at_note");
    } else {
      $("confirm-when").textContent = tr("compose.confirm_now");
    }
    const over = state.app && state.app.confirm_over ? state.app.confirm_over : 1000;
    const typed = n > over;
    $("confirm-type").hidden = !typed;
    $("confirm-need").textContent = numFmt.format(n);
    $("confirm-count").value = "";
    $("confirm-ok").disabled = typed;
    $("confirm").hidden = false;
    (typed ? $("confirm-count") : $("confirm-back")).focus();
  });
  $("confirm-count").addEventListener("input", () => {
    $("confirm-ok").disabled = $("confirm-count").value.replace(/[,\s，]/g, "") !== String(state.recipients);
  });
  $("confirm-back").addEventListener("click", hideConfirm);
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape" && !$("confirm").hidden) hideConfirm(); });
  $("confirm-ok").addEventListener("click", () => {
    if (!pending) return;
    const extra = pending;
    save(extra, !extra.send_at && state.editing !== null);
  });
  $("cancel-notice").addEventListener("click", async () => {
    if (!state.editing || !confirm(tr("compose.cancel_confirm"))) return;
    busy(true);
    try {
      const [code, j] = await api("POST", "/api/v1/messages/" + encodeURIComponent(state.editing.msgid) + "/cancel");
      if (code !== 200) { showError(j, trf("compose.cancel_http", code)); return; }
      location.href = "/";
    } finally {
      busy(false);
    }
  });

  // ---- Templates (issue 41): a new notice from a template, and an admin's save as template.
  async function loadTemplates() {
    const pick = $("template-pick");
    while (pick.options.length > 1) pick.remove(1);
    try {
      const j = await getJSON("/api/v1/templates?" + appQ());
      for (const t of j.templates || []) {
        const o = el("option", t.name);
        o.value = String(t.id);
        pick.append(o);
      }
    } catch (e) {
      // No templates on this server, or none for this app: nothing to pick.
    }
    // The template this page was started from stays named in the picker
    // (issue 49: it said no template after loading one), with its
    // rename and delete.
    if (templateID && [...pick.options].some((o) => o.value === templateID)) {
      pick.value = templateID;
      $("rename-template").hidden = false;
      $("delete-template").hidden = false;
    }
    $("template-bar").hidden = false;
  }
  $("rename-template").addEventListener("click", async () => {
    const pick = $("template-pick");
    const old = pick.options[pick.selectedIndex].textContent;
    const name = (prompt(tr("compose.template_name"), old) || "").trim();
    if (!name || name === old) return;
    try {
      const t = await getJSON("/api/v1/templates/" + encodeURIComponent(templateID));
      const b = { app: t.app, name: name, title: t.title, body: t.body, url: t.url, audience: t.audience, follow_up: t.follow_up,
        markdown: t.markdown, attachments: t.attachments || [], read_rule: t.read_rule, min_read_seconds: t.min_read_seconds };
      const [code, j] = await api("PUT", "/api/v1/templates/" + encodeURIComponent(templateID), b);
      $("template-status").textContent = code === 200 ? tr("compose.template_renamed") : trf("compose.template_failed", (j && j.error) || code);
      if (code === 200) loadTemplates();
    } catch (e) {
      $("template-status").textContent = trf("compose.template_failed", e.message);
    }
  });
  $("delete-template").addEventListener("click", async () => {
    const pick = $("template-pick");
    if (!confirm(trf("compose.delete_template_confirm", pick.options[pick.selectedIndex].textContent))) return;
    const [code, j] = await api("DELETE", "/api/v1/templates/" + encodeURIComponent(templateID));
    if (code === 204) { location.href = "/new"; return; }
    $("template-status").textContent = trf("compose.template_failed", (j && j.error) || code);
  });
  $("template-pick").addEventListener("change", () => {
    const id = $("template-pick").value;
    if (id) location.href = "/new?template=" + encodeURIComponent(id);
  });
  $("save-template").addEventListener("click", async () => {
    const name = (prompt(tr("compose.template_name"), $("title").value) || "").trim();
    if (!name) return;
    const b = { app: state.app.name, name: name, title: $("title").value, body: $("body").value, url: $("url").value,
      audience: audience(), follow_up: followUp(), markdown: $("markdown").value, attachments: atts.map((a) => a.id),
      read_rule: $("read-rule").value, min_read_seconds: Math.max(0, Math.floor(+$("min-read").value || 0)) };
    const [code, j] = await api("POST", "/api/v1/templates", b);
    $("template-status").textContent = code === 201 ? tr("compose.template_saved") : trf("compose.template_failed", (j && j.error) || code);
    if (code === 201) loadTemplates();
  });

  // ---- Start: the apps, then a notice to edit or duplicate, if any.
  function prefill(m) {
    $("title").value = m.title || "";
    $("body").value = m.body || "";
    $("url").value = m.url || "";
    const a = m.audience || {};
    state.all = !!a.all;
    $("all").checked = state.all;
    state.pickedDepts = new Set(a.departments || []);
    state.pickedTags = new Set(a.tags || []);
    const ids = a.userids || [];
    if (ids.length <= 50) for (const u of ids) state.people.set(u, u); else for (const u of ids) state.pasted.add(u);
    if (m.follow_up && m.follow_up.policy) {
      state.fuPrefilled = true;
      $("fu-custom").checked = true;
      fuFill(m.follow_up.policy);
    }
  }
  // loadContent fills the full text a draft or scheduled notice keeps:
  // its Markdown and read rule, and its attachments as the preview of its
  // version 1 names them.
  async function loadContent(m) {
    $("markdown").value = m.content.markdown || "";
    $("url").value = "";
    if (m.read_rule) $("read-rule").value = m.read_rule;
    $("min-read").value = String(m.min_read_seconds || 0);
    if ((m.content.attachments || []).length > 0) {
      const v = await getJSON("/api/v1/messages/" + encodeURIComponent(m.msgid) + "/content");
      atts.splice(0, atts.length, ...(v.attachments || []));
    }
    showAttachments();
    contentChanged();
  }
  async function start() {
    showCounts();
    try {
      await loadApps();
    } catch (e) {
      $("form-error").textContent = trf("compose.apps_failed", e.message);
      return;
    }
    let app = "";
    if (templateID) {
      try {
        const t = await getJSON("/api/v1/templates/" + encodeURIComponent(templateID));
        prefill({ ...t, follow_up: t.follow_up ? { policy: t.follow_up } : null });
        $("markdown").value = t.markdown || "";
        // The template's attachments, attached again (issue 41).
        atts.splice(0, atts.length, ...(t.attachment_files || []));
        showAttachments();
        if (t.read_rule) $("read-rule").value = t.read_rule;
        if (t.min_read_seconds) $("min-read").value = String(t.min_read_seconds);
        contentChanged();
        app = t.app;
      } catch (e) {
        $("form-error").textContent = trf("compose.load_failed", templateID, e.message);
      }
    }
    const src = editID || fromID;
    if (src) {
      try {
        const m = await getJSON("/api/v1/messages/" + encodeURIComponent(src));
        prefill(m);
        app = m.app;
        if (editID) {
          if (m.state !== "draft" && m.state !== "scheduled" && m.state !== "held") {
            $("form-error").textContent = tr("compose.already_sending");
            busy(true);
          }
          state.editing = m;
          if (m.content) await loadContent(m); // the full text it keeps
          $("compose-heading").textContent = m.state === "draft" ? tr("compose.edit_draft") : tr("compose.edit_scheduled");
          document.title = $("compose-heading").textContent + " · " + tr("brand.name");
          $("cancel-notice").hidden = false;
          if (m.send_at) {
            $("when-later").checked = true;
            $("send-at").value = toWall(Date.parse(m.send_at), (state.apps.find((x) => x.name === m.app) || {}).timezone || "Asia/Shanghai");
          }
        }
      } catch (e) {
        $("form-error").textContent = trf("compose.load_failed", src, e.message);
      }
    }
    await selectApp(app || (state.apps[0] && state.apps[0].name));
    showCounts();
    showPreview();
    showZone();
    fuShow();
  }
  catalogueReady.then(start); // app.js loads the catalogue; tr() needs it
})();
