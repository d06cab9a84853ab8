// Run in every frame of a rendered page before its own scripts: a page may not leave, nor open windows,
// and the addresses it tries to go to are kept as links (read by snapshot.js).
(() => {
  if (window.__webtrawl) return;
  const found = [];
  const note = (url) => {
    try {
      if (url != null && found.length < 1000) found.push(new URL(String(url), document.baseURI).href);
    } catch (e) {}
  };
  Object.defineProperty(window, "__webtrawl", { value: { found }, enumerable: false });
  window.open = function (url) {
    note(url);
    return null;
  };
  for (const name of ["pushState", "replaceState"]) {
    const original = history[name];
    history[name] = function (state, title, url) {
      note(url);
      return original.apply(this, arguments);
    };
  }
})();
