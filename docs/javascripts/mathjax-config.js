// MathJax 3, served by the site itself (see docs/_hooks/offline_math.py).
// Markdown pages carry math as \( \) and \[ \] inside .arithmatex elements
// (pymdownx.arithmatex, generic mode); notebook pages carry $ and $$ inside
// rendered Markdown (Markdown cells, and Markdown displayed by code cells).
// Nothing else is touched: the page body is ignored and only those classes
// are processed. (Material's usual ".*|" would also ignore every class-less
// <p> inside a notebook cell.)
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: "md-header|md-container",
    processHtmlClass: "arithmatex|jp-MarkdownOutput|jp-RenderedMarkdown",
  },
};
