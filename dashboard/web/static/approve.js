// The approver's page (issue 41): 批准 or 驳回 (with a reason) of the
// version shown, through POST /api/v1/messages/{msgid}/approval.
(function () {
  "use strict";
  const view = document.getElementById("approval");
  if (!view) return;
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const err = document.getElementById("approval-error");
  async function decide(approve, reason) {
    err.textContent = "";
    const res = await fetch("/api/v1/messages/" + encodeURIComponent(view.dataset.msgid) + "/approval", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify({ approve: approve, version_hash: view.dataset.version, reason: reason }),
    });
    if (res.ok) {
      location.reload();
      return;
    }
    let j = null;
    try { j = await res.json(); } catch (e) { /* not JSON */ }
    err.textContent = (j && j.error) || res.statusText;
  }
  const preview = document.getElementById("preview-to-me");
  if (preview) preview.addEventListener("click", async () => {
    err.textContent = "";
    const res = await fetch("/api/v1/messages/" + encodeURIComponent(view.dataset.msgid) + "/approval/preview", {
      method: "POST", headers: { "X-CSRF-Token": csrf },
    });
    let j = null;
    try { j = await res.json(); } catch (e) { /* not JSON */ }
    if (res.ok) {
      const st = document.getElementById("preview-status");
      st.textContent = st.dataset.sent;
    } else {
      err.textContent = (j && j.error) || res.statusText;
    }
  });
  // The author's side: 催办 and 撤回申请.
  async function author(path) {
    const out = document.getElementById("author-error");
    out.textContent = "";
    const res = await fetch("/api/v1/messages/" + encodeURIComponent(view.dataset.msgid) + "/approval/" + path, {
      method: "POST", headers: { "X-CSRF-Token": csrf },
    });
    let j = null;
    try { j = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) out.textContent = (j && j.error) || res.statusText;
    return res.ok;
  }
  const nudge = document.getElementById("nudge");
  if (nudge) nudge.addEventListener("click", async () => {
    if (await author("nudge")) {
      const st = document.getElementById("nudge-status");
      st.textContent = st.dataset.sent;
    }
  });
  const withdraw = document.getElementById("withdraw");
  if (withdraw) withdraw.addEventListener("click", async () => {
    if (!window.confirm(withdraw.dataset.confirm)) return;
    if (await author("withdraw")) location.href = "/";
  });
  const approve = document.getElementById("approve");
  if (approve) approve.addEventListener("click", () => decide(true, ""));
  const reject = document.getElementById("reject");
  if (reject) reject.addEventListener("click", () => {
    const reason = document.getElementById("reject-reason");
    if (!reason.value.trim()) {
      err.textContent = reason.dataset.required;
      reason.focus();
      return;
    }
    decide(false, reason.value.trim());
  });
})();
