// Material puts each code block's copy button in a <nav>, a landmark; landmarks of one kind must be
// told apart, so each gets a name: "Code block 3". Blocks appear as Material builds them, and again
// when a collapsed block opens, so the names are given whenever the page changes.
const nameCodeNavs = () => {
  document.querySelectorAll(".md-code__nav").forEach((nav, index) => {
    const name = `Code block ${index + 1}`;
    if (nav.getAttribute("aria-label") !== name) nav.setAttribute("aria-label", name);
  });
};
new MutationObserver(nameCodeNavs).observe(document.documentElement, { childList: true, subtree: true });
nameCodeNavs();
