// What the playgrounds of trained models share (docs/playground_induction.md and
// docs/playground_text.md): reading a tensor of the files attn_ref.training writes, the tutorials'
// colour map, building elements, the live region, drawing one head's weights, and loading a model.
// Each page loads this script before its own; both are deferred, so they run in that order.
window.attnPlayground = (() => {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const SETTLE_MS = 250; // the live region speaks this long after the last change

  // Signed bytes times the tensor's scale, in row-major order, as attn_ref.training's
  // from_int8_entry reads them: a vector for a 1-D tensor, rows of [rows][cols] for a 2-D one.
  function tensor(stored) {
    const bytes = Uint8Array.from(atob(stored.int8), (c) => c.charCodeAt(0));
    const levels = new Int8Array(bytes.buffer);
    const [rows, cols = 1] = stored.shape;
    const out = [];
    for (let r = 0; r < rows; r++) {
      out.push(Array.from(levels.subarray(r * cols, (r + 1) * cols), (n) => n * stored.scale));
    }
    return stored.shape.length === 1 ? out.map((row) => row[0]) : out;
  }

  // nn.Linear: y = x W^T + b, for each row x (b = 0 for a layer without bias).
  const linear = (X, { W, b = null }) =>
    X.map((x) => W.map((w, o) => w.reduce((s, wc, c) => s + wc * x[c], 0) + (b ? b[o] : 0)));

  // Causal softmax(q k^T / sqrt(d_k)) for each head, as attn_ref.multihead computes it:
  // weights[h][i][j], zero for j > i. model.heads heads of model.dk features each.
  function headWeights(Q, K, model) {
    const scale = 1 / Math.sqrt(model.dk);
    const T = Q.length;
    return Array.from({ length: model.heads }, (_, h) => {
      const lo = h * model.dk; // head h reads features lo .. lo + d_k - 1
      return Q.map((q, i) => {
        const scores = [];
        for (let j = 0; j <= i; j++) {
          let d = 0;
          for (let c = lo; c < lo + model.dk; c++) d += q[c] * K[j][c];
          scores.push(d * scale);
        }
        const max = Math.max(...scores); // subtracted so that exp never overflows
        const exps = scores.map((s) => Math.exp(s - max));
        const total = exps.reduce((a, b) => a + b, 0);
        return Array.from({ length: T }, (_, j) => (j <= i ? exps[j] / total : 0));
      });
    });
  }

  // Each head's weights times its block of the values, the heads side by side: (T, C).
  function headOutputs(weights, V, dk) {
    return V.map((_, i) =>
      V[0].map((_, c) => {
        const h = Math.floor(c / dk); // feature c belongs to head h
        return weights[h][i].reduce((s, a, j) => s + a * V[j][c], 0);
      }),
    );
  }

  function el(tag, attributes = {}, parent = null, namespace = null) {
    const node = namespace ? document.createElementNS(namespace, tag) : document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) {
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    if (parent) parent.append(node);
    return node;
  }
  const svg = (tag, attributes, parent) => el(tag, attributes, parent, SVG_NS);
  const fmt = (x) => x.toFixed(2);

  // Matplotlib's viridis, the tutorials' colour map, entry for entry (256 colours, dark purple
  // for 0 to yellow for 1), looked up as matplotlib looks it up; the same in both colour schemes.
  const VIRIDIS =
    "44015444025645045745055946075a46085c460a5d460b5e470d60470e61471063471164471365481467481668481769" +
    "48186a481a6c481b6d481c6e481d6f481f70482071482173482374482475482576482677482878482979472a7a472c7a" +
    "472d7b472e7c472f7d46307e46327e46337f463480453581453781453882443983443a83443b84433d84433e85423f85" +
    "4240864241864142874144874045884046883f47883f48893e49893e4a893e4c8a3d4d8a3d4e8a3c4f8a3c508b3b518b" +
    "3b528b3a538b3a548c39558c39568c38588c38598c375a8c375b8d365c8d365d8d355e8d355f8d34608d34618d33628d" +
    "33638d32648e32658e31668e31678e31688e30698e306a8e2f6b8e2f6c8e2e6d8e2e6e8e2e6f8e2d708e2d718e2c718e" +
    "2c728e2c738e2b748e2b758e2a768e2a778e2a788e29798e297a8e297b8e287c8e287d8e277e8e277f8e27808e26818e" +
    "26828e26828e25838e25848e25858e24868e24878e23888e23898e238a8d228b8d228c8d228d8d218e8d218f8d21908d" +
    "21918c20928c20928c20938c1f948c1f958b1f968b1f978b1f988b1f998a1f9a8a1e9b8a1e9c891e9d891f9e891f9f88" +
    "1fa0881fa1881fa1871fa28720a38620a48621a58521a68522a78522a88423a98324aa8325ab8225ac8226ad8127ad81" +
    "28ae8029af7f2ab07f2cb17e2db27d2eb37c2fb47c31b57b32b67a34b67935b77937b87838b9773aba763bbb753dbc74" +
    "3fbc7340bd7242be7144bf7046c06f48c16e4ac16d4cc26c4ec36b50c46a52c56954c56856c66758c7655ac8645cc863" +
    "5ec96260ca6063cb5f65cb5e67cc5c69cd5b6ccd5a6ece5870cf5773d05675d05477d1537ad1517cd2507fd34e81d34d" +
    "84d44b86d54989d5488bd6468ed64590d74393d74195d84098d83e9bd93c9dd93ba0da39a2da37a5db36a8db34aadc32" +
    "addc30b0dd2fb2dd2db5de2bb8de29bade28bddf26c0df25c2df23c5e021c8e020cae11fcde11dd0e11cd2e21bd5e21a" +
    "d8e219dae319dde318dfe318e2e418e5e419e7e419eae51aece51befe51cf1e51df4e61ef6e620f8e621fbe723fde725";
  function colour(a) {
    const i = Math.min(Math.max(Math.floor(a * 256), 0), 255);
    return `#${VIRIDIS.slice(6 * i, 6 * i + 6)}`;
  }

  // One head's causal weights w[i][j] as an SVG map, in units of one cell: room on the left
  // (`left` cells) for the queries' labels, and below for the keys', in two staggered lines so
  // that neighbouring labels never touch. The selected query's row is framed; keys for which
  // outlined(i, j) is true get a small outline. Classes are the page's prefix plus -cell, -masked,
  // -target, -row and -labels.
  function drawMap(map, { weights, labels, query, prefix, left, outlined = null }) {
    const T = labels.length;
    const BELOW = 2.2;
    map.replaceChildren();
    map.setAttribute("viewBox", `0 0 ${left + T} ${T + BELOW}`);
    svg("rect", { x: left, y: 0, width: T, height: T, class: `${prefix}-masked` }, map); // above the diagonal
    for (let i = 0; i < T; i++) {
      for (let j = 0; j <= i; j++) {
        svg("rect", { x: left + j, y: i, width: 1.02, height: 1.02, fill: colour(weights[i][j]), class: `${prefix}-cell` }, map);
      }
    }
    if (outlined) {
      for (let i = 0; i < T; i++) {
        for (let j = 0; j <= i; j++) {
          if (outlined(i, j)) svg("rect", { x: left + j + 0.15, y: i + 0.15, width: 0.7, height: 0.7, class: `${prefix}-target` }, map);
        }
      }
    }
    svg("rect", { x: left, y: query, width: query + 1, height: 1, class: `${prefix}-row` }, map);
    const group = svg("g", { class: `${prefix}-labels`, "font-size": 0.85, "aria-hidden": "true" }, map);
    labels.forEach((text, i) => {
      svg("text", { x: left - 0.25, y: i + 0.5, "text-anchor": "end", "dominant-baseline": "central", text }, group);
      const below = T + (i % 2 === 0 ? 0.85 : 1.75); // even keys on the first line, odd on the second
      svg("text", { x: left + i + 0.5, y: below, "text-anchor": "middle", "dominant-baseline": "central", text }, group);
    });
  }

  // Shows what is wrong with the input (message), or that nothing is (null): the alert under the
  // box, the box marked invalid, and the parts that show results hidden and the slider disabled
  // while it is wrong.
  function showError({ input, alert, slider, parts }, message) {
    const wrong = message !== null;
    alert.textContent = wrong ? message : "";
    alert.hidden = !wrong;
    if (wrong) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
    for (const part of parts) part.hidden = wrong;
    slider.disabled = wrong;
  }

  // A function that sets the live region's text once the reader pauses.
  function announcer(region) {
    let timer = null;
    return (text) => {
      clearTimeout(timer);
      timer = setTimeout(() => (region.textContent = text), SETTLE_MS);
    };
  }

  // Fetches the model file that each root of `selector` names in data-model, and builds its view;
  // if the file cannot be read, the root says so instead.
  function start(selector, readModel, build, errorClass) {
    document.querySelectorAll(selector).forEach(async (root) => {
      try {
        const response = await fetch(root.dataset.model);
        if (!response.ok) throw new Error(response.statusText);
        build(root, readModel(await response.json()));
      } catch (problem) {
        root.replaceChildren();
        el("p", { class: errorClass, role: "alert", text: `The trained model could not be loaded (${problem.message}).` }, root);
      }
    });
  }

  return { tensor, linear, headWeights, headOutputs, el, svg, fmt, colour, drawMap, showError, announcer, start };
})();
