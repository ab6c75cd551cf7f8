// The induction playground of docs/playground_induction.md, in plain JavaScript.
//
// The element of class "pgi" names in data-model the JSON file that the induction tutorial
// wrote at build (attn_ref.training.playground_json). This script reads it, runs the trained
// model's two attention layers on the tokens the reader types, draws every head's weights with
// the tokens on both axes, names the induction heads as the tutorial does, and writes the tokens,
// weights and names back as JSON in data-state, where the tests read them.
(() => {
  "use strict";

  const SVG_NS = "http://www.w3.org/2000/svg";
  const SETTLE_MS = 250; // the live region speaks this long after the last change
  // The tutorial's criterion: a layer-1 head is an induction head when its prefix-matching score
  // is above ROLE (here, on the typed tokens) and its copying score above COPYING (the file holds
  // it, computed from the full-precision weights at build).
  const ROLE = 0.3;
  const COPYING = 0.5;
  // Each map in SVG units of one cell: room on the left for the queries' tokens, and below for
  // the keys' tokens, in two staggered lines so that neighbouring labels never touch.
  const LEFT = 1.9;
  const BELOW = 2.2;
  const LABEL_SIZE = 0.85;

  // ---- The model, read as attn_ref.training.model_from_playground_json reads it ----

  // Signed bytes times the tensor's scale, in row-major order: rows of [rows][cols].
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

  function readModel(document_) {
    const t = (name) => tensor(document_.tensors[name]);
    const layer = (l, names) =>
      Object.fromEntries(names.map((p) => [p, { W: t(`layers.${l}.${p}.weight`), b: t(`layers.${l}.${p}.bias`) }]));
    return {
      vocab: document_.vocab_size,
      context: document_.context_length,
      heads: document_.num_heads,
      dk: document_.embed_dim / document_.num_heads,
      copying: document_.copying, // one per layer-1 head
      E: t("token_embedding.weight"),
      P: t("position_embedding.weight"),
      layers: [layer(0, ["q_proj", "k_proj", "v_proj", "out_proj"]), layer(1, ["q_proj", "k_proj"])],
    };
  }

  // ---- The forward pass, as AttentionOnlyDecoder.forward computes it ----

  // nn.Linear: y = x W^T + b, for each row x.
  const linear = (X, { W, b }) => X.map((x) => W.map((w, o) => w.reduce((s, wc, c) => s + wc * x[c], 0) + b[o]));

  // Causal softmax(q k^T / sqrt(d_k)) for each head: weights[h][i][j], zero for j > i.
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

  function forward(tokens, model) {
    let x = tokens.map((t, i) => model.E[t].map((e, c) => e + model.P[i][c])); // (T, C)
    const weights = [];
    for (const [l, layer] of model.layers.entries()) {
      const w = headWeights(linear(x, layer.q_proj), linear(x, layer.k_proj), model);
      weights.push(w);
      if (l === 0) {
        const V = linear(x, layer.v_proj);
        const heads = x.map((_, i) =>
          V[0].map((_, c) => {
            const h = Math.floor(c / model.dk);
            return w[h][i].reduce((s, a, j) => s + a * V[j][c], 0);
          }),
        ); // (T, C): the heads side by side
        const out = linear(heads, layer.out_proj);
        x = x.map((row, i) => row.map((v, c) => v + out[i][c])); // the residual stream layer 1 reads
      }
    }
    return weights; // [layer][head][query][key]
  }

  // For each query, the keys j <= i whose previous token is the query's token: where an
  // induction head should look. Queries with such keys make the repeated part.
  function inductionTargets(tokens) {
    return tokens.map((t, i) => tokens.map((_, j) => j >= 1 && j <= i && tokens[j - 1] === t));
  }

  // Olsson et al.'s prefix matching, per head: mean weight on those keys over the repeated part.
  function prefixScores(weights, targets) {
    const queries = targets.map((row, i) => (row.some(Boolean) ? i : -1)).filter((i) => i >= 0);
    if (queries.length === 0) return null;
    return weights.map((layer) =>
      layer.map(
        (w) => queries.reduce((s, i) => s + w[i].reduce((t, a, j) => t + (targets[i][j] ? a : 0), 0), 0) / queries.length,
      ),
    );
  }

  // ---- Reading what the reader typed ----

  function parse(text, model) {
    const words = text.trim().split(/[\s,]+/).filter(Boolean);
    const last = model.vocab - 1;
    if (words.length === 0) return { error: `Type at least one token: whole numbers from 0 to ${last}, separated by spaces.` };
    const unknown = words.find((w) => !/^\d+$/.test(w) || Number(w) > last);
    if (unknown !== undefined) return { error: `"${unknown}" is not a token. Tokens are whole numbers from 0 to ${last}.` };
    if (words.length > model.context) {
      return {
        error: `That is ${words.length} tokens. The model reads at most ${model.context}: remove ${words.length - model.context}.`,
      };
    }
    return { tokens: words.map(Number) };
  }

  // ---- Drawing ----

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

  function drawHead(figure, w, tokens, targets, query, isInduction, label) {
    const T = tokens.length;
    figure.classList.toggle("pgi-induction", isInduction);
    const map = figure.querySelector("svg");
    map.replaceChildren();
    map.setAttribute("viewBox", `0 0 ${LEFT + T} ${T + BELOW}`);
    svg("rect", { x: LEFT, y: 0, width: T, height: T, class: "pgi-masked" }, map); // above the diagonal
    for (let i = 0; i < T; i++) {
      for (let j = 0; j <= i; j++) {
        svg("rect", { x: LEFT + j, y: i, width: 1.02, height: 1.02, fill: colour(w[i][j]), class: "pgi-cell" }, map);
      }
    }
    if (isInduction) {
      for (let i = 0; i < T; i++) {
        for (let j = 0; j <= i; j++) {
          if (targets[i][j]) svg("rect", { x: LEFT + j + 0.15, y: i + 0.15, width: 0.7, height: 0.7, class: "pgi-target" }, map);
        }
      }
    }
    svg("rect", { x: LEFT, y: query, width: query + 1, height: 1, class: "pgi-row" }, map);
    const labels = svg("g", { class: "pgi-labels", "font-size": LABEL_SIZE, "aria-hidden": "true" }, map);
    tokens.forEach((t, i) => {
      svg("text", { x: LEFT - 0.25, y: i + 0.5, "text-anchor": "end", "dominant-baseline": "central", text: t }, labels);
      const below = T + (i % 2 === 0 ? 0.85 : 1.75); // even keys on the first line, odd on the second
      svg("text", { x: LEFT + i + 0.5, y: below, "text-anchor": "middle", "dominant-baseline": "central", text: t }, labels);
    });
    const top = w[query].indexOf(Math.max(...w[query]));
    map.setAttribute("aria-label", `${label}: weights of ${T} queries over ${T} keys, each labelled by its token.`);
    figure.querySelector(".pgi-caption").textContent = `${label}${isInduction ? ", induction head" : ""}`;
    figure.querySelector(".pgi-readout").textContent =
      `Query ${query} (token ${tokens[query]}): ${fmt(w[query][top])} on key ${top} (token ${tokens[top]}).`;
  }

  function announcer(region) {
    let timer = null;
    return (text) => {
      clearTimeout(timer);
      timer = setTimeout(() => (region.textContent = text), SETTLE_MS);
    };
  }

  function build(root, model) {
    root.replaceChildren();
    const last = model.vocab - 1;
    const form = el("div", { class: "pgi-controls" }, root);
    el("label", { for: "pgi-tokens", text: `Tokens (whole numbers from 0 to ${last}, at most ${model.context})` }, form);
    const input = el("input", {
      id: "pgi-tokens",
      type: "text",
      autocomplete: "off",
      spellcheck: "false",
      "aria-describedby": "pgi-error",
    }, form);
    input.value = root.dataset.tokens;
    el("label", { for: "pgi-query", text: "Query shown in the readouts" }, form);
    const query = el("input", { id: "pgi-query", type: "range", min: 0, max: 0, step: 1, value: 0 }, form);
    const queryText = el("output", { for: "pgi-query", class: "pgi-query-value" }, form);
    const error = el("p", { id: "pgi-error", class: "pgi-error", role: "alert", hidden: "" }, root);
    const maps = el("div", { class: "pgi-maps" }, root);
    const figures = [];
    for (let l = 0; l < model.layers.length; l++) {
      for (let h = 0; h < model.heads; h++) {
        const figure = el("figure", { class: "pgi-head" }, maps);
        svg("svg", { role: "img" }, figure);
        el("figcaption", { class: "pgi-caption" }, figure);
        el("p", { class: "pgi-readout" }, figure);
        figures.push({ figure, l, h });
      }
    }
    const legend = el("p", { class: "pgi-legend" }, root);
    el("span", { class: "pgi-scale", "aria-hidden": "true" }, legend);
    legend.append(
      " weight 0 (dark purple) to 1 (yellow). Rows are queries, columns keys, each labelled by its token. " +
        "Outlined: the keys an induction head should pick.",
    );
    const status = el("p", { class: "pgi-status", "aria-live": "polite" }, root);
    const say = announcer(status);

    let current = null; // the last valid tokens and their weights

    function draw() {
      const { tokens, weights, targets, scores, induction } = current;
      const i = Number(query.value);
      queryText.textContent = `query ${i}, token ${tokens[i]}`;
      for (const { figure, l, h } of figures) {
        const isInduction = l === 1 && induction.includes(h);
        drawHead(figure, weights[l][h], tokens, targets, i, isInduction, `Layer ${l}, head ${h}`);
      }
      return scores;
    }

    function update() {
      const parsed = parse(input.value, model);
      if (parsed.error) {
        error.textContent = parsed.error;
        error.hidden = false;
        input.setAttribute("aria-invalid", "true");
        maps.hidden = true;
        legend.hidden = true;
        query.disabled = true;
        current = null;
        root.dataset.state = JSON.stringify({ input: input.value, error: parsed.error, tokens: null, weights: null });
        say("");
        return;
      }
      error.hidden = true;
      input.removeAttribute("aria-invalid");
      maps.hidden = false;
      legend.hidden = false;
      query.disabled = false;
      const { tokens } = parsed;
      const weights = forward(tokens, model);
      const targets = inductionTargets(tokens);
      const scores = prefixScores(weights, targets);
      // Every layer-1 head that prefix-matches on these tokens and copies (by its weights).
      const matching = scores ? scores[1].map((s, h) => (s > ROLE ? h : -1)).filter((h) => h >= 0) : [];
      const induction = matching.filter((h) => model.copying[h] > COPYING);
      const previousQuery = Number(query.value);
      const atEnd = previousQuery === Number(query.max); // then follow the last token as the reader types
      query.max = tokens.length - 1;
      query.value = atEnd ? tokens.length - 1 : Math.min(previousQuery, tokens.length - 1);
      current = { tokens, weights, targets, scores, induction };
      draw();
      root.dataset.state = JSON.stringify({
        input: input.value,
        error: null,
        tokens,
        weights,
        prefix: scores,
        copying: model.copying,
        induction,
      });
      const repeated = targets.filter((row) => row.some(Boolean)).length;
      const heads = (list) => (list.length > 1 ? `Layer 1 heads ${list.join(" and ")}` : `Layer 1 head ${list[0]}`);
      const share = (list) => list.map((h) => fmt(scores[1][h])).join(" and ");
      const notCopying = matching.filter((h) => !induction.includes(h));
      let sentence;
      if (!scores) sentence = `${tokens.length} tokens, none repeats: no head has anything to match.`;
      else if (matching.length === 0)
        sentence = `${tokens.length} tokens, ${repeated} in the repeated part; no layer 1 head picks the next token there.`;
      else {
        sentence = `${tokens.length} tokens, ${repeated} in the repeated part.`;
        if (induction.length > 0) {
          const are = induction.length > 1 ? "are induction heads" : "is an induction head";
          sentence +=
            ` ${heads(induction)} ${are}: on average ${share(induction)} of the weight goes to ` +
            `the token after the earlier occurrence, and the weights copy it (copying ${induction.map((h) => fmt(model.copying[h])).join(" and ")}).`;
        }
        if (notCopying.length > 0)
          sentence += ` ${heads(notCopying)} ${
            notCopying.length > 1 ? "match but do not copy: not induction heads" : "matches but does not copy: not an induction head"
          }.`;
      }
      say(sentence);
    }

    input.addEventListener("input", update);
    query.addEventListener("input", () => current && draw());
    update();
  }

  async function start(root) {
    try {
      const response = await fetch(root.dataset.model);
      if (!response.ok) throw new Error(response.statusText);
      build(root, readModel(await response.json()));
    } catch (problem) {
      root.replaceChildren();
      el("p", { class: "pgi-error", role: "alert", text: `The trained model could not be loaded (${problem.message}).` }, root);
    }
  }

  document.querySelectorAll(".pgi[data-model]").forEach(start);
})();
