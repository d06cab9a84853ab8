"""Headless Chromium for a crawl: started when first needed, recycled, restarted, never left behind.

Memory: a browser context (its cache, its renderers' heaps) grows with every page it shows, which is how
long Playwright crawls run out of memory; each context here shows at most `recycle_every` pages and is
closed when its last page ends, so memory stays flat over a long crawl.

Faults: a Chromium that crashed or was killed is noticed (`disconnected`), its pages fail with
`BrowserGone` (the engine retries them within the retry budget) and the next page starts a new one.

Leftovers: every Chromium carries `--webtrawl-owner=PID` on its command line. Playwright's driver closes
the browser when webtrawl ends, even by Ctrl-C or a crash; should webtrawl be killed with -9 while the
driver is busy, the next webtrawl that renders ends every Chromium whose owner is no longer alive
(`end_orphans`; by hand: `pkill -f -- --webtrawl-owner=`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

log = logging.getLogger(__name__)

OWNER_FLAG = "--webtrawl-owner="
CHROMIUM_ARGS = (
    "--no-sandbox",  # crawlers run as root in containers, where Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--mute-audio",
    "--autoplay-policy=no-user-gesture-required",
    # Every request is served by webtrawl (`Renderer`); whatever escaped interception (a preconnect, a
    # prefetch) goes to a proxy that is not there, loopback included, so the browser reaches nothing by itself.
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    # WebRTC's UDP ignores the proxy; `page.js` also takes RTCPeerConnection away.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)
VIEWPORT = {"width": 1280, "height": 800}
START_TIMEOUT = 30.0
"""Seconds starting a browser, a context or a tab may take before the browser is taken for dead."""
INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu: apt-get install chromium) or Playwright's own "
    "(python -m playwright install chromium)"
)


class BrowserGone(Exception):
    """The browser crashed or was killed while a page was in it."""


def chromium_path() -> str | None:
    """The Chromium to use: $WEBTRAWL_CHROMIUM, else the system's, else None (Playwright's own, if installed)."""
    chosen = os.environ.get("WEBTRAWL_CHROMIUM")
    if chosen:
        return chosen
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def end_orphans() -> int:
    """End the Chromium processes an earlier webtrawl left behind (its owner is gone); return how many."""
    ended = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        owner = next((a[len(OWNER_FLAG) :] for a in args if a.startswith(OWNER_FLAG.encode())), None)
        if owner is None or not owner.isdigit() or _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            os.kill(int(proc.name), signal.SIGKILL)
            ended += 1
    if ended:
        log.warning("ended %d Chromium process(es) left by a webtrawl that was killed", ended)
    return ended


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Context:
    """A browser context, its browser, and how many pages it has shown and shows now."""

    def __init__(self, context: BrowserContext, browser: Browser) -> None:
        self.context = context
        self.browser = browser
        self.used = 0
        self.open = 0


class Chromium:
    """One Chromium for a crawl, giving out pages in recycled contexts; `async with Chromium(...)`."""

    def __init__(self, *, recycle_every: int, user_agent: str, setup: Any) -> None:
        """`setup(context)`: an async callable that readies each new context (routes, init scripts)."""
        self._recycle_every = recycle_every
        self._user_agent = user_agent
        self._setup = setup
        self._playwright: Playwright | None = None
        self._manager: Any = None
        self._browser: Browser | None = None
        self._current: _Context | None = None
        self._lock = asyncio.Lock()
        self.restarts = 0
        """Browsers started after one crashed or was killed."""
        self._crashed = False
        self._closing: set[asyncio.Future[None]] = set()

    async def __aenter__(self) -> Chromium:
        try:
            from playwright.async_api import async_playwright
        except ImportError:
            raise ConfigError("--render needs Playwright: pip install 'webtrawl[browser]'") from None
        end_orphans()
        self._manager = async_playwright()
        self._playwright = await self._manager.start()
        path = chromium_path()
        try:
            if path is None and not Path(self._playwright.chromium.executable_path).exists():
                raise ConfigError(f"--render found no Chromium: {INSTALL_HINT}")
            # Started now, not with the first page: a browser that cannot start ends the crawl before it begins.
            self._browser = await self._launch()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        browser, self._browser, self._current = self._browser, None, None
        if browser is not None:
            await _close_browser(browser)
        for task in list(self._closing):
            await task
        manager, self._manager, self._playwright = self._manager, None, None
        if manager is not None:
            with contextlib.suppress(Exception):
                await manager.__aexit__(None, None, None)

    async def _launch(self) -> Browser:
        assert self._playwright is not None
        try:
            browser = await self._playwright.chromium.launch(
                executable_path=chromium_path(),
                args=[*CHROMIUM_ARGS, f"{OWNER_FLAG}{os.getpid()}"],
                handle_sigint=False,  # Ctrl-C is webtrawl's to handle: it stops the crawl, then closes the browser
                handle_sigterm=False,
                handle_sighup=False,
            )
        except Exception as exc:
            raise ConfigError(f"--render could not start Chromium ({_first_line(exc)}): {INSTALL_HINT}") from None
        browser.on("disconnected", self._on_disconnect)
        return browser

    def _on_disconnect(self, browser: Browser) -> None:
        if browser is self._browser:
            log.warning("the browser went away (crashed or killed); pages in it will be tried again")
            self._browser, self._current, self._crashed = None, None, True

    async def _context(self) -> _Context:
        async with self._lock:
            try:
                # A browser killed a moment ago may not have said so yet: what it is asked then never answers.
                async with asyncio.timeout(START_TIMEOUT):
                    return await self._open_context()
            except (TimeoutError, ConfigError) as exc:
                self._forget()
                raise BrowserGone(f"the browser did not answer: {exc}") from None
            except Exception as exc:  # Playwright's errors: the browser is gone
                self._forget()
                raise BrowserGone(_first_line(exc)) from None

    async def _open_context(self) -> _Context:
        if self._browser is None:
            if self._crashed:
                self.restarts += 1
                self._crashed = False
            self._browser = await self._launch()
        browser, current = self._browser, self._current
        # A context of a browser that went away meanwhile (`_on_disconnect`, `_forget`) is never used again.
        if current is None or current.used >= self._recycle_every or current.browser is not browser:
            if current is not None and current.open == 0:
                await _close_quietly(current.context)
            context = await browser.new_context(
                user_agent=self._user_agent,
                viewport=VIEWPORT,  # type: ignore[arg-type]
                service_workers="block",  # a worker's requests would escape the page's routes
                accept_downloads=False,
            )
            await self._setup(context)
            if self._browser is not browser:
                raise BrowserGone("the browser went away while a context was opened")
            self._current = current = _Context(context, browser)
        current.used += 1
        current.open += 1
        return current

    def _forget(self) -> None:
        """Give up on the current browser: the next page starts a new one (this one is closed meanwhile)."""
        browser, self._browser, self._current = self._browser, None, None
        self._crashed = True
        if browser is not None:
            self._closing.add(task := asyncio.ensure_future(_close_browser(browser)))
            task.add_done_callback(self._closing.discard)

    @contextlib.asynccontextmanager
    async def page(self) -> AsyncIterator[Page]:
        """A new tab, closed (with its context, once that is used up) when the block ends."""
        holder = await self._context()
        try:
            try:
                async with asyncio.timeout(START_TIMEOUT):
                    page = await holder.context.new_page()
            except Exception as exc:
                if holder is self._current:
                    self._forget()
                raise BrowserGone(_first_line(exc)) from None
            try:
                yield page
            finally:
                with contextlib.suppress(Exception):
                    # A renderer stuck in a script answers nothing: the browser ends it, but not at once.
                    await asyncio.wait_for(page.close(run_before_unload=False), 5)
        finally:
            holder.open -= 1
            if holder.open == 0 and holder is not self._current:
                await _close_quietly(holder.context)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _close_browser(browser: Browser) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(browser.close(), 10)


async def _close_quietly(context: BrowserContext) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(context.close(), 10)
