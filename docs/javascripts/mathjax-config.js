// MathJax 3, served by the site itself (see sitebuild/offline_math.py). Pages carry math as
// \( \) and \[ \] inside .arithmatex elements (pymdownx.arithmatex, generic mode); nothing else
// is touched.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: "md-header|md-container",
    processHtmlClass: "arithmatex",
  },
};
