// The search index holds the whole site's prose: the largest file a page would fetch, and most
// visits never search. Material requests it as every page loads; this holds the request back until
// the reader opens the search, or arrives with a query (?q=) or a search's highlight (?h=).
(() => {
  const { open, send } = XMLHttpRequest.prototype;
  const indexRequests = new WeakSet();
  const held = [];
  let wanted = /[?&][qh]=/.test(location.search);

  const release = () => {
    wanted = true;
    held.splice(0).forEach(([request, body]) => send.call(request, body));
  };
  XMLHttpRequest.prototype.open = function (method, url, ...rest) {
    if (new URL(url, location.href).pathname.endsWith("/search/search_index.json")) indexRequests.add(this);
    return open.call(this, method, url, ...rest);
  };
  XMLHttpRequest.prototype.send = function (body) {
    if (indexRequests.has(this) && !wanted) held.push([this, body]);
    else send.call(this, body);
  };
  // Every way into the search (a click, a tap, the / and s keys) focuses its box.
  document.addEventListener("focusin", (event) => {
    if (event.target.matches(".md-search__input")) release();
  });
})();
