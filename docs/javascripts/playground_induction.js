// The induction playground of docs/playground_induction.md, in plain JavaScript.
//
// The element of class "pgi" names in data-model the JSON file that the induction tutorial
// wrote at build (attn_ref.training.playground_json). This script reads it, runs the trained
// model's two attention layers on the tokens the reader types, draws every head's weights with
// the tokens on both axes, names the induction heads as the tutorial does, and writes the tokens,
// weights and names back as JSON in data-state, where the tests read them.
// It runs after docs/javascripts/playground_models.js, whose helpers it shares with the text playground.
(() => {
  "use strict";

  const { tensor, linear, headWeights, headOutputs, el, svg, fmt, drawMap, showError, announcer, start } =
    window.attnPlayground;
  // The tutorial's criterion: a layer-1 head is an induction head when its prefix-matching score
  // is above ROLE (here, on the typed tokens) and its copying score above COPYING (the file holds
  // it, computed from the full-precision weights at build).
  const ROLE = 0.3;
  const COPYING = 0.5;
  const LEFT = 1.9; // room, in cells, for the queries' tokens left of each map

  // ---- The model, read as attn_ref.training.model_from_playground_json reads it ----

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

  function forward(tokens, model) {
    let x = tokens.map((t, i) => model.E[t].map((e, c) => e + model.P[i][c])); // (T, C)
    const weights = [];
    for (const [l, layer] of model.layers.entries()) {
      const w = headWeights(linear(x, layer.q_proj), linear(x, layer.k_proj), model);
      weights.push(w);
      if (l === 0) {
        const out = linear(headOutputs(w, linear(x, layer.v_proj), model.dk), layer.out_proj);
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

  function drawHead(figure, w, tokens, targets, query, isInduction, label) {
    const T = tokens.length;
    figure.classList.toggle("pgi-induction", isInduction);
    const map = figure.querySelector("svg");
    const outlined = isInduction ? (i, j) => targets[i][j] : null; // the keys an induction head should pick
    drawMap(map, { weights: w, labels: tokens.map(String), query, prefix: "pgi", left: LEFT, outlined });
    const top = w[query].indexOf(Math.max(...w[query]));
    map.setAttribute("aria-label", `${label}: weights of ${T} queries over ${T} keys, each labelled by its token.`);
    figure.querySelector(".pgi-caption").textContent = `${label}${isInduction ? ", induction head" : ""}`;
    figure.querySelector(".pgi-readout").textContent =
      `Query ${query} (token ${tokens[query]}): ${fmt(w[query][top])} on key ${top} (token ${tokens[top]}).`;
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

    const view = { input, alert: error, slider: query, parts: [maps, legend] };
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
      showError(view, parsed.error ?? null);
      if (parsed.error) {
        current = null;
        root.dataset.state = JSON.stringify({ input: input.value, error: parsed.error, tokens: null, weights: null });
        say("");
        return;
      }
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

  start(".pgi[data-model]", readModel, build, "pgi-error");
})();
