// The built-in behaviours, one function each, called by name from webtrawl.render.renderer.
({
  // Scroll to the bottom; returns the page's height (compared between steps) and the window's.
  scroll() {
    const root = document.scrollingElement || document.documentElement;
    window.scrollTo(0, root.scrollHeight);
    return [root.scrollHeight, window.innerHeight];
  },

  // Start every media element (muted) and click at most five controls that look like play buttons.
  // A link to another page is not a control: it is read as a link instead.
  play() {
    let media = 0;
    for (const element of document.querySelectorAll("audio, video")) {
      element.muted = true;
      try {
        const started = element.play();
        if (started && started.catch) started.catch(() => {});
      } catch (e) {}
      media++;
    }
    const looksLikePlay = /(^|[^a-z])play([^a-z]|$)|\u25b6|\u25ba/i;
    const candidates = document.querySelectorAll(
      "button, [role=button], a, [aria-label*=play i], [class*=play i], [id*=play i], [title*=play i]"
    );
    let clicked = 0;
    for (const element of candidates) {
      if (clicked >= 5) break;
      const href = element.getAttribute("href");
      if (href && !href.startsWith("#") && !href.toLowerCase().startsWith("javascript:")) continue;
      const className = typeof element.className === "string" ? element.className : "";
      const text = (element.textContent || "").trim();
      const label = [element.getAttribute("aria-label"), element.title, element.id, className,
                     text.length <= 20 ? text : ""].join(" ");
      if (!looksLikePlay.test(label)) continue;
      element.click();
      clicked++;
    }
    return { media, clicked };
  },

  // The visible text of `body`, at most `limit` characters. innerText lays the page out, which takes seconds
  // on a huge document: there the text nodes are read instead (outside scripts and styles), up to the limit.
  text(body, limit) {
    if (document.getElementsByTagName("*").length <= 20000) return body.innerText.slice(0, limit);
    const skipped = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE"]);
    const walker = document.createTreeWalker(body, NodeFilter.SHOW_TEXT, {
      acceptNode: (node) => (skipped.has(node.parentNode.nodeName) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
    });
    const parts = [];
    let size = 0;
    while (size < limit && walker.nextNode()) {
      const text = walker.currentNode.nodeValue.trim();
      if (text) {
        parts.push(text);
        size += text.length + 1;
      }
    }
    return parts.join("\n").slice(0, limit);
  },

  // What the page is now: title, visible text, links (anchors, frames, what it tried to open), its markup.
  snapshot(limits) {
    const links = new Set();
    for (const element of document.querySelectorAll("a[href], area[href]")) {
      if (links.size >= limits.links) break;
      if (typeof element.href === "string") links.add(element.href);
    }
    for (const frame of document.querySelectorAll("iframe[src], frame[src]")) links.add(frame.src);
    for (const url of window.__webtrawl ? window.__webtrawl.found : []) links.add(url);
    const body = document.body;
    let dom = null;
    if (limits.dom) {
      const doctype = document.doctype ? "<!DOCTYPE " + document.doctype.name + ">\n" : "";
      dom = (doctype + document.documentElement.outerHTML).slice(0, limits.dom);
    }
    return {
      title: document.title || "",
      text: body ? this.text(body, limits.text) : "",
      links: [...links].slice(0, limits.links),
      dom,
    };
  },
})
