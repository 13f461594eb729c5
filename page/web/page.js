// The reading page (issue 39): draws each PDF attachment's pages inside
// the page with the vendored pdf.js, each page a canvas the width of the
// text, the last one marked (.last-page) for what reaches the end.
import * as pdfjs from "./pdfjs/pdf.min.mjs";

pdfjs.GlobalWorkerOptions.workerSrc = new URL("./pdfjs/pdf.worker.min.mjs", import.meta.url).href;

// A large PDF is read in ranges of 64 KiB as its pages are drawn, not
// downloaded whole first (pdfjs-dist 5.6's options: no stream of the whole
// file, no fetch ahead of the pages asked): the first page shows after its
// own bytes. The receiver answers ranges (and the object store the links
// point at, when attachments.s3 is set).
const rangeChunkSize = 65536;

async function draw(box) {
  const doc = await pdfjs.getDocument({
    url: box.dataset.src,
    isEvalSupported: false,
    disableStream: true,
    disableAutoFetch: true,
    rangeChunkSize,
  }).promise;
  // On a phone a page the width of the screen is too small to read
  // (issue 49): pages are drawn at twice the width there, so 放大 (the
  // .zoomed class, 200 % wide and scrolled sideways) stays sharp.
  const narrow = box.clientWidth < 600;
  const width = box.clientWidth * (narrow ? 2 : 1);
  if (narrow) addZoom(box);
  for (let n = 1; n <= doc.numPages; n++) {
    const page = await doc.getPage(n);
    const scale = width / page.getViewport({ scale: 1 }).width;
    const vp = page.getViewport({ scale: scale * (window.devicePixelRatio || 1) });
    const canvas = document.createElement("canvas");
    canvas.width = Math.floor(vp.width);
    canvas.height = Math.floor(vp.height);
    canvas.className = "pdf-page" + (n === doc.numPages ? " last-page" : "");
    canvas.dataset.page = String(n);
    box.appendChild(canvas);
    await page.render({ canvas, canvasContext: canvas.getContext("2d"), viewport: vp }).promise;
  }
  // The last page's bottom edge: on screen, the PDF was read to its end.
  const end = document.createElement("div");
  end.className = "pdf-end";
  box.appendChild(end);
  box.dataset.pages = String(doc.numPages);
}

// addZoom puts a 放大/缩小 switch above a PDF's pages.
function addZoom(box) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "pdf-zoom";
  b.textContent = "放大阅读";
  b.addEventListener("click", () => {
    const on = box.classList.toggle("zoomed");
    b.textContent = on ? "缩小" : "放大阅读";
  });
  box.before(b);
}

for (const box of document.querySelectorAll(".pdf-pages[data-src]")) {
  draw(box).catch((e) => {
    box.dataset.error = String(e && e.message || e);
    box.classList.add("failed");
  });
}

// Reaching the end (issue 39): the end of the text (#notice-end), the
// bottom of the last page of every PDF (.pdf-end) and every image
// attachment must each have been on screen; then the page posts read_to_end once, and #ack is enabled once
// the notice's min_read_seconds have passed too. The server checks both
// again: the button is only a convenience.
const box = document.getElementById("ack-box");
const ack = document.getElementById("ack");
const hint = document.getElementById("ack-hint");
const loadedAt = Date.now();
const minRead = Number(box.dataset.minRead || 0) * 1000;
let ended = box.dataset.ended === "1";
const acked = box.dataset.acked === "1";

async function post(event) {
  const res = await fetch(box.dataset.events, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ event, version: Number(box.dataset.version), view: box.dataset.view }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.message || String(res.status));
  return body;
}

function enable() {
  if (acked || !ended) return;
  const wait = loadedAt + minRead - Date.now();
  if (wait > 0) {
    if (hint) hint.textContent = "请至少阅读 " + Math.ceil(wait / 1000) + " 秒后确认";
    setTimeout(enable, Math.min(wait, 1000));
    return;
  }
  ack.disabled = false;
  if (hint) hint.textContent = "";
}

const seen = new Set();
const targets = new Set();
function reached() {
  for (const t of targets) if (!seen.has(t)) return false;
  // Every PDF must have drawn its last page (or failed, when its box is
  // the target instead).
  for (const pdf of document.querySelectorAll(".pdf-pages[data-src]")) {
    if (!pdf.dataset.pages && !pdf.classList.contains("failed")) return false;
  }
  return true;
}
let posting = false;
async function check() {
  if (ended || posting || !reached()) return;
  posting = true;
  try {
    await post("read_to_end");
    ended = true;
    ack.dataset.ended = "1";
    enable();
  } catch (e) {
    if (hint) hint.textContent = e.message;
    setTimeout(() => { posting = false; check(); }, 2000);
    return;
  }
  posting = false;
}
const io = new IntersectionObserver((entries) => {
  for (const e of entries) if (e.isIntersecting) { seen.add(e.target); io.unobserve(e.target); }
  check();
});
function watch(el) { if (el && !targets.has(el)) { targets.add(el); io.observe(el); } }
function watchAll() {
  watch(document.getElementById("notice-end"));
  for (const img of document.querySelectorAll(".attachment.image img")) watch(img);
  for (const pdf of document.querySelectorAll(".pdf-pages[data-src]")) {
    watch(pdf.querySelector(".pdf-end") || (pdf.classList.contains("failed") ? pdf : null));
  }
  check();
}
if (!acked) {
  watchAll();
  new MutationObserver(watchAll).observe(document.querySelector("main"), { subtree: true, childList: true, attributes: true, attributeFilter: ["class", "data-pages"] });
  enable();
  ack.addEventListener("click", async () => {
    ack.disabled = true;
    try {
      await post("acknowledged");
      ack.textContent = "已确认知悉（第 " + box.dataset.version + " 版）";
      ack.classList.add("done");
      box.dataset.acked = "1";
      if (hint) hint.textContent = "";
      const done = document.getElementById("ack-done");
      if (done) done.hidden = false;
      done?.scrollIntoView({ block: "nearest" });
    } catch (e) {
      if (hint) hint.textContent = e.message;
      ack.disabled = false;
    }
  });
}
