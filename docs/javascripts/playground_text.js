// The text playground of docs/playground_text.md, in plain JavaScript.
//
// The element of class "pgt" names in data-model the JSON file that the character-model tutorial
// wrote at build (attn_ref.training.char_playground_json). This script reads it, runs the whole
// model on the text the reader types, as CharTransformer.forward computes it, shows the likeliest
// next characters and draws every head's weights with the characters on both axes, labelling the
// heads the tutorial named. It writes the text, probabilities and weights back as JSON in
// data-state, where the tests read them. It runs after docs/javascripts/playground_models.js.
(() => {
  "use strict";

  const { tensor, linear, headWeights, headOutputs, el, svg, fmt, drawMap, showError, announcer, start } =
    window.attnPlayground;
  const LEFT = 1.2; // room, in cells, for the queries' characters left of each map
  const TOP = 5; // next characters listed
  const NORM_EPS = 1e-5; // nn.LayerNorm's default, which CharTransformer keeps

  // ---- The model, read as attn_ref.training.char_model_from_playground_json reads it ----

  function readModel(document_) {
    const t = (name) => tensor(document_.tensors[name]);
    const linearLayer = (name) => ({ W: t(`${name}.weight`), b: t(`${name}.bias`) });
    const norm = (name) => ({ weight: t(`${name}.weight`), bias: t(`${name}.bias`) });
    const alphabet = Array.from(document_.alphabet);
    return {
      alphabet,
      index: new Map(alphabet.map((c, i) => [c, i])),
      context: document_.context_length,
      heads: document_.num_heads,
      dk: document_.embed_dim / document_.num_heads,
      named: document_.heads, // [{layer, head, role, score}], as the tutorial named them
      E: t("token_embedding.weight"),
      P: t("position_embedding.weight"),
      blocks: Array.from({ length: document_.num_layers }, (_, l) => ({
        norm1: norm(`blocks.${l}.norm1`),
        q: linearLayer(`blocks.${l}.attn.q_proj`),
        k: linearLayer(`blocks.${l}.attn.k_proj`),
        v: linearLayer(`blocks.${l}.attn.v_proj`),
        out: linearLayer(`blocks.${l}.attn.out_proj`),
        norm2: norm(`blocks.${l}.norm2`),
        up: linearLayer(`blocks.${l}.mlp.0`),
        down: linearLayer(`blocks.${l}.mlp.2`),
      })),
      norm: norm("norm"),
      unembed: { W: t("head.weight") }, // no bias
    };
  }

  // ---- The forward pass, as CharTransformer.forward computes it ----

  // nn.LayerNorm: each row less its mean, over its standard deviation (the biased variance, plus
  // eps), times weight plus bias.
  function layerNorm(X, { weight, bias }) {
    return X.map((x) => {
      const mean = x.reduce((s, a) => s + a, 0) / x.length;
      const variance = x.reduce((s, a) => s + (a - mean) ** 2, 0) / x.length;
      const rstd = 1 / Math.sqrt(variance + NORM_EPS);
      return x.map((a, c) => (a - mean) * rstd * weight[c] + bias[c]);
    });
  }

  // erf from its series 2/sqrt(pi) exp(-x^2) sum_n 2^n x^(2n+1) / (1 3 5 ... (2n+1)): every term
  // is positive, so float64 sums it to a few ulps (JavaScript has no Math.erf). From |x| = 6 on,
  // erf is +-1 to float64's precision.
  function erf(x) {
    const a = Math.abs(x);
    if (a >= 6) return Math.sign(x);
    let term = a;
    let sum = a;
    for (let n = 1; term > sum * 1e-17; n++) {
      term *= (2 * a * a) / (2 * n + 1);
      sum += term;
    }
    return Math.sign(x) * Math.min(1, (2 / Math.sqrt(Math.PI)) * Math.exp(-a * a) * sum);
  }
  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2)); // nn.GELU(), the exact one

  const add = (X, Y) => X.map((row, i) => row.map((v, c) => v + Y[i][c]));

  function softmax(row) {
    const max = Math.max(...row); // subtracted so that exp never overflows
    const exps = row.map((z) => Math.exp(z - max));
    const total = exps.reduce((a, b) => a + b, 0);
    return exps.map((e) => e / total);
  }

  // Next-character probabilities after every position (T, 96) and every layer's weights.
  function forward(ids, model) {
    let x = ids.map((id, i) => model.E[id].map((e, c) => e + model.P[i][c])); // (T, C)
    const weights = [];
    for (const block of model.blocks) {
      const h = layerNorm(x, block.norm1);
      const w = headWeights(linear(h, block.q), linear(h, block.k), model); // (H, T, T)
      weights.push(w);
      x = add(x, linear(headOutputs(w, linear(h, block.v), model.dk), block.out));
      const hidden = linear(layerNorm(x, block.norm2), block.up).map((row) => row.map(gelu)); // (T, 4C)
      x = add(x, linear(hidden, block.down));
    }
    const logits = linear(layerNorm(x, model.norm), model.unembed); // (T, 96)
    return { probabilities: logits.map(softmax), weights }; // weights: [layer][head][query][key]
  }

  // ---- Reading what the reader typed ----

  // A character as the maps and lists show it: the space and the newline made visible.
  const shown = (c) => (c === " " ? "\u2423" : c === "\n" ? "\u21b5" : c);
  const described = (c) => (c === " " ? "the space" : c === "\n" ? "the newline" : `"${c}"`);

  function parse(text, model) {
    const chars = Array.from(text); // by code point, so that an emoji is one character
    const last = model.alphabet[model.alphabet.length - 1];
    if (chars.length === 0) return { error: "Type at least one character: the model predicts the one that comes next." };
    const bad = chars.findIndex((c) => !model.index.has(c));
    if (bad >= 0) {
      const c = chars[bad];
      const code = `U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
      const what = /\p{L}|\p{N}|\p{P}|\p{S}/u.test(c) ? `"${c}" (${code})` : code; // a tab or other invisible: its code
      return {
        error:
          `The character ${what} at position ${bad} is not one the model knows. It reads only the newline and ` +
          `the printable ASCII characters, from the space to "${last}".`,
      };
    }
    if (chars.length > model.context) {
      return {
        error: `That is ${chars.length} characters. The model reads at most ${model.context}: remove ${chars.length - model.context}.`,
      };
    }
    return { chars, ids: chars.map((c) => model.index.get(c)) };
  }

  // ---- Drawing ----

  function build(root, model) {
    root.replaceChildren();
    const form = el("div", { class: "pgt-controls" }, root);
    el("label", { for: "pgt-text", text: `Text (the newline and printable ASCII, at most ${model.context} characters)` }, form);
    const input = el("textarea", {
      id: "pgt-text",
      rows: 2,
      autocomplete: "off",
      autocapitalize: "off",
      spellcheck: "false",
      "aria-describedby": "pgt-error",
    }, form);
    input.value = root.dataset.text;
    el("label", { for: "pgt-query", text: "Query shown in the predictions and readouts" }, form);
    const query = el("input", { id: "pgt-query", type: "range", min: 0, max: 0, step: 1, value: 0 }, form);
    const queryText = el("output", { for: "pgt-query", class: "pgt-query-value" }, form);
    const error = el("p", { id: "pgt-error", class: "pgt-error", role: "alert", hidden: "" }, root);

    const next = el("div", { class: "pgt-next" }, root);
    const nextTitle = el("p", { class: "pgt-next-title" }, next);
    const top = el("ol", { class: "pgt-top" }, next);

    const maps = el("div", { class: "pgt-maps" }, root);
    const roles = new Map(model.named.map((n) => [`${n.layer}.${n.head}`, n]));
    const figures = [];
    for (let l = 0; l < model.blocks.length; l++) {
      for (let h = 0; h < model.heads; h++) {
        const role = roles.get(`${l}.${h}`);
        const figure = el("figure", { class: `pgt-head${role ? " pgt-named" : ""}` }, maps);
        const map = svg("svg", { role: "img" }, figure);
        el("figcaption", { class: "pgt-caption", text: `Head ${l}.${h}${role ? `: ${role.role}` : ""}` }, figure);
        const readout = el("p", { class: "pgt-readout" }, figure);
        figures.push({ map, readout, l, h, role });
      }
    }
    const legend = el("p", { class: "pgt-legend" }, root);
    el("span", { class: "pgt-scale", "aria-hidden": "true" }, legend);
    legend.append(
      " weight 0 (dark purple) to 1 (yellow). Rows are queries, columns keys, each labelled by its character " +
        "(\u2423 a space, \u21b5 a newline). Framed: the heads the tutorial named, with their role.",
    );
    const status = el("p", { class: "pgt-status", "aria-live": "polite" }, root);
    const say = announcer(status);

    const view = { input, alert: error, slider: query, parts: [next, maps, legend] };
    let current = null; // the last valid text and what the model computed on it

    // The TOP likeliest next characters after position i: [[character, probability], ...].
    const likeliest = (i) =>
      current.probabilities[i]
        .map((p, id) => [model.alphabet[id], p])
        .sort((a, b) => b[1] - a[1])
        .slice(0, TOP);

    function draw() {
      const { chars, weights } = current;
      const i = Number(query.value);
      queryText.textContent = `query ${i}, ${described(chars[i])}`;
      const before = chars.slice(Math.max(0, i - 11), i + 1).join("");
      nextTitle.textContent = `After "${i > 11 ? "\u2026" : ""}${before}", the likeliest next characters:`;
      top.replaceChildren();
      for (const [c, p] of likeliest(i)) {
        const item = el("li", {}, top);
        el("code", { class: "pgt-char", text: shown(c), "aria-label": described(c) }, item);
        el("span", { class: "pgt-bar", style: `width: ${(100 * p).toFixed(1)}%`, "aria-hidden": "true" }, item);
        el("span", { class: "pgt-p", text: fmt(p) }, item);
      }
      const labels = chars.map(shown);
      for (const { map, readout, l, h, role } of figures) {
        const w = weights[l][h];
        drawMap(map, { weights: w, labels, query: i, prefix: "pgt", left: LEFT });
        const head = `Head ${l}.${h}${role ? `, ${role.role}` : ""}`;
        map.setAttribute("aria-label", `${head}: weights of ${chars.length} queries over ${chars.length} keys, each labelled by its character.`);
        const best = w[i].indexOf(Math.max(...w[i]));
        readout.textContent = `Query ${i} (${described(chars[i])}): ${fmt(w[i][best])} on key ${best} (${described(chars[best])}).`;
      }
    }

    function summary() {
      const { chars, weights } = current;
      const last = chars.length - 1;
      const [[c, p]] = likeliest(last);
      let sentence = `${chars.length} characters. Likeliest next character: ${described(c)}, ${fmt(p)}.`;
      for (const { layer, head, role } of model.named) {
        const w = weights[layer][head][last];
        const best = w.indexOf(Math.max(...w));
        sentence += ` Head ${layer}.${head} (${role}) puts ${fmt(w[best])} of the last character's weight on ${described(chars[best])}, key ${best}.`;
      }
      return sentence;
    }

    function update() {
      const parsed = parse(input.value, model);
      showError(view, parsed.error ?? null);
      if (parsed.error) {
        current = null;
        root.dataset.state = JSON.stringify({ input: input.value, error: parsed.error, ids: null, probabilities: null, weights: null });
        say("");
        return;
      }
      const { chars, ids } = parsed;
      const previousQuery = Number(query.value);
      const atEnd = previousQuery === Number(query.max); // then follow the last character as the reader types
      query.max = ids.length - 1;
      query.value = atEnd ? ids.length - 1 : Math.min(previousQuery, ids.length - 1);
      current = { chars, ids, ...forward(ids, model) };
      draw();
      root.dataset.state = JSON.stringify({
        input: input.value,
        error: null,
        ids,
        probabilities: current.probabilities,
        weights: current.weights,
        named: model.named,
        top: likeliest(ids.length - 1),
      });
      say(summary());
    }

    input.addEventListener("input", update);
    query.addEventListener("input", () => current && draw());
    update();
  }

  start(".pgt[data-model]", readModel, build, "pgt-error");
})();
