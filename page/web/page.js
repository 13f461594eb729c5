// The reading page (issue 39): draws each PDF attachment's pages inside
// the page with the vendored pdf.js, each page a canvas the width of the
// text, the last one marked (.last-page) for what reaches the end.
import * as pdfjs from "./pdfjs/pdf.min.mjs";

pdfjs.GlobalWorkerOptions.workerSrc = new URL("./pdfjs/pdf.worker.min.mjs", import.meta.url).href;

async function draw(box) {
  const doc = await pdfjs.getDocument({ url: box.dataset.src, isEvalSupported: false }).promise;
  const width = box.clientWidth;
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
  box.dataset.pages = String(doc.numPages);
}

for (const box of document.querySelectorAll(".pdf-pages[data-src]")) {
  draw(box).catch((e) => {
    box.dataset.error = String(e && e.message || e);
    box.classList.add("failed");
  });
}
