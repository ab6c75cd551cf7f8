// Typesets TeX as MathML for sitebuild/typeset.py. One request per line on stdin, a JSON list of
// [tex, display] pairs; one answer per line on stdout: {"mathml": [...]} or, for the first formula
// Temml refuses, {"error": message, "index": i}.
import readline from "node:readline";
import temml from "temml";

const lines = readline.createInterface({ input: process.stdin, terminal: false });
lines.on("line", (line) => {
  const formulas = JSON.parse(line);
  const mathml = [];
  for (const [index, [tex, display]] of formulas.entries()) {
    try {
      mathml.push(temml.renderToString(tex, { displayMode: display, throwOnError: true, trust: false }));
    } catch (error) {
      process.stdout.write(JSON.stringify({ error: String(error.message || error), index }) + "\n");
      return;
    }
  }
  process.stdout.write(JSON.stringify({ mathml }) + "\n");
});
