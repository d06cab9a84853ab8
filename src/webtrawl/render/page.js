// Run in every frame of a rendered page before its own scripts: a page may not leave, nor open windows, nor
// open peer-to-peer connections (their UDP would pass by webtrawl); the addresses it tries to go to are kept
// as links (the top frame's are read by behaviors.js's snapshot).
(() => {
  if (window.__webtrawl) return;
  const found = [];
  const note = (url) => {
    try {
      if (url != null && found.length < 1000) found.push(new URL(String(url), document.baseURI).href);
    } catch (e) {}
  };
  Object.defineProperty(window, "__webtrawl", { value: { found }, enumerable: false });
  for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel"]) {
    try {
      delete window[name];
      Object.defineProperty(window, name, { value: undefined });
    } catch (e) {}
  }
  // A link that opens another window (a target, or a base target) is noted, not followed: no window opens.
  addEventListener(
    "click",
    (event) => {
      const link = event.target && event.target.closest ? event.target.closest("a[href], area[href]") : null;
      const base = document.querySelector("base[target]");
      const target = (link && (link.getAttribute("target") || (base && base.getAttribute("target")))) || "_self";
      if (link && !["_self", "_parent", "_top"].includes(target.toLowerCase())) {
        note(link.href);
        event.preventDefault();
      }
    },
    true,
  );
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
