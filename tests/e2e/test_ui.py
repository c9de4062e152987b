"""The web UI at /ui, through a real stack with tokens on: sign-in, search, a memory's page, tokens, harvest; its
CSRF and cookie rules over plain HTTP, and its error pages for bad input. Browser flows run in Debian's chromium."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from mnemo_embed import HashEmbedder
from mnemo_server.stack import Stack
from tests.e2e.ui import UiClient, csrf_of, launch_chromium
from tests.helpers import Postgres, start_stack

# Playwright's assertions retry for 5 s by default; the full suite runs chromium beside several test
# processes on two cores, where a page's turn came later than that once. Waiting longer only delays
# a failure: each assertion still returns as soon as it holds.
expect.set_options(timeout=15_000)


@dataclass
class Site:
    stack: Stack
    admin: str
    a: str
    b: str
    agent_a: str
    agent_b: str
    reviewer_a: str
    keyword: str
    other_keyword: str
    note: str
    other_note: str
    t_mid: str

    @property
    def url(self) -> str:
        return self.stack.base_url


async def _ok(http: httpx.AsyncClient, token: str, method: str, path: str, body: Any = None) -> Any:
    response = await http.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code in (200, 201), (path, response.text)
    return response.json()


@pytest.fixture(scope="module")
async def site(postgres: Postgres) -> AsyncIterator[Site]:
    stack = await start_stack(
        await postgres.create_database("ui"), HashEmbedder(64), MNEMO_AUTH="on", MNEMO_RATE_LIMIT_PER_MIN="100000"
    )
    admin = stack.bootstrap_token
    tag = uuid.uuid4().hex[:6]
    keyword, other_keyword = f"wombat{tag}", f"capybara{tag}"
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=60) as http:
        a = (await _ok(http, admin, "POST", "/api/v1/workspaces", {"name": f"ui-a-{tag}"}))["workspace"]["id"]
        b = (await _ok(http, admin, "POST", "/api/v1/workspaces", {"name": f"ui-b-{tag}"}))["workspace"]["id"]

        async def token(principal: str, role: str, ws: str) -> str:
            body = {"principal": principal, "role": role, "workspaces": [ws]}
            made = await _ok(http, admin, "POST", "/api/v1/tokens", body)
            return str(made["secret"])

        agent_a, agent_b = await token("agent-a", "agent", a), await token("agent-b", "agent", b)
        reviewer_a = await token("reviewer-a", "reviewer", a)
        note = (
            await _ok(
                http,
                agent_a,
                "POST",
                "/api/v1/memories",
                {
                    "title": f"The {keyword} cache",
                    "content": f"First draft: the {keyword} cache lives in /tmp.",
                    "kind": "decision",
                },
            )
        )["memory"]["id"]
        # A moment between the two versions, to the second (what a datetime-local input sends).
        await asyncio.sleep(1.1)
        t_mid = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        await asyncio.sleep(1.1)
        final = {"content": f"Final: the {keyword} cache lives in /var/cache."}
        await _ok(http, agent_a, "PATCH", f"/api/v1/memories/{note}", final)
        other_note = (
            await _ok(
                http,
                agent_b,
                "POST",
                "/api/v1/memories",
                {"title": f"The {other_keyword} plan", "content": f"The {other_keyword} plan is secret to B."},
            )
        )["memory"]["id"]
    yield Site(stack, admin, a, b, agent_a, agent_b, reviewer_a, keyword, other_keyword, note, other_note, t_mid)
    await stack.stop()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await launch_chromium(playwright)
        yield chromium
        await chromium.close()


async def _signed_in_page(browser: Browser, site: Site, token: str) -> Page:
    page = await (await browser.new_context(base_url=site.url)).new_page()
    await page.goto("/ui/search")
    await expect(page).to_have_url(f"{site.url}/ui/login")  # no session: the sign-in page
    # Keyboard only: the token field has focus, Enter submits.
    await page.keyboard.type(token)
    await page.keyboard.press("Enter")
    await expect(page).to_have_url(f"{site.url}/ui/search")
    return page


# -- browser flows -----------------------------------------------------------------------------------------


async def test_sign_in_search_open_a_memory_its_history_and_audit(browser: Browser, site: Site) -> None:
    page = await _signed_in_page(browser, site, site.agent_a)
    await expect(page.locator(".who")).to_contain_text("agent-a · agent")
    await page.get_by_label("Query").fill(site.keyword)
    await page.get_by_role("button", name="Search", exact=True).click()
    result = page.locator(f".result[data-id='{site.note}']")
    await expect(result).to_contain_text(f"The {site.keyword} cache")
    # Negative beside it: B's note is not among A's results, searching B's word finds nothing.
    await expect(page.locator(f".result[data-id='{site.other_note}']")).to_have_count(0)
    await result.get_by_role("link").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"The {site.keyword} cache")
    await expect(page.locator("pre.content").first).to_contain_text("/var/cache")
    await expect(page.locator("dl.labels")).to_contain_text("decision")
    await expect(page.locator("dl.labels")).to_contain_text("agent-a")
    timeline = page.locator("#timeline")
    await expect(timeline.locator(".tl-version")).to_have_count(2)
    await expect(timeline).to_contain_text("version 2")
    audit = page.locator("#audit tbody tr")
    await expect(audit).to_have_count(2)
    await expect(page.locator("#audit")).to_contain_text("update")
    # As of a moment between the two versions: the first text, not the second.
    await page.get_by_label("Show this memory as recorded at (UTC)").fill(site.t_mid)
    await page.get_by_role("button", name="Show").click()
    past = page.locator("#as-of-view")
    await expect(past).to_contain_text("First draft")
    await expect(past).not_to_contain_text("/var/cache")
    await expect(past).to_contain_text("version 1")
    # Sign out: the session ends, and the pages send the browser back to sign in.
    await page.get_by_role("button", name="Sign out").click()
    await expect(page).to_have_url(f"{site.url}/ui/login")
    await page.goto(f"/ui/memories/{site.note}")
    await expect(page).to_have_url(f"{site.url}/ui/login?expired=1")
    await page.context.close()


async def test_search_filters_and_explain(browser: Browser, site: Site) -> None:
    page = await _signed_in_page(browser, site, site.agent_a)
    await page.get_by_label("Query").fill(site.keyword)
    await page.locator("summary").click()
    await page.get_by_label("Explain the ranking").check()
    await page.get_by_label("note", exact=True).check()
    await page.get_by_role("button", name="Search", exact=True).click()
    # Kind note only: the decision is filtered out.
    await expect(page.locator(f".result[data-id='{site.note}']")).to_have_count(0)
    await expect(page.locator("#results-h")).to_contain_text("0 results")
    # Positive control: kind decision finds it, with its ranking explained.
    await page.get_by_label("note", exact=True).uncheck()
    await page.get_by_label("decision", exact=True).check()
    await page.get_by_role("button", name="Search", exact=True).click()
    result = page.locator(f".result[data-id='{site.note}']")
    await expect(result.locator("table.explain")).to_contain_text("Trust")
    await expect(result.locator("table.explain")).to_contain_text("Lexical")
    await page.context.close()


async def test_tokens_page_is_the_admins_and_shows_a_secret_once(browser: Browser, site: Site) -> None:
    agent = await _signed_in_page(browser, site, site.agent_a)
    await expect(agent.get_by_role("link", name="Tokens")).to_have_count(0)
    response = await agent.goto("/ui/tokens")
    assert response is not None and response.status == 403
    await expect(agent.get_by_role("heading", level=1)).to_contain_text("403")
    await expect(agent.locator(".message")).to_contain_text("needs the admin role")
    await agent.context.close()
    # Positive control: the admin has the page, creates a token (its secret shown once) and revokes it.
    admin = await _signed_in_page(browser, site, site.admin)
    await admin.get_by_role("link", name="Tokens").click()
    await admin.get_by_label("Principal").fill("ui-made")
    await admin.get_by_label("Role").select_option("agent")
    await admin.get_by_label("Workspaces").fill(site.a)
    await admin.get_by_role("button", name="Create").click()
    secret = await admin.get_by_label("Secret").input_value()
    assert secret.startswith("mnemo_")
    async with httpx.AsyncClient(base_url=site.url) as http:
        works = await http.get("/api/v1/workspaces", headers={"Authorization": f"Bearer {secret}"})
        assert works.status_code == 200
        await admin.goto("/ui/tokens")
        assert secret not in await admin.content()  # once: a reload no longer shows it
        row = admin.locator("tr", has=admin.get_by_text("ui-made", exact=True))
        await row.get_by_role("button", name="Revoke").click()
        await expect(admin.locator("[role=status]")).to_contain_text("revoked")
        refused = await http.get("/api/v1/workspaces", headers={"Authorization": f"Bearer {secret}"})
        assert refused.status_code == 401
    await admin.context.close()


async def test_harvest_page_shows_the_status(browser: Browser, site: Site) -> None:
    page = await _signed_in_page(browser, site, site.agent_a)
    await page.get_by_role("link", name="Harvest").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Harvest")
    await expect(page.locator("#agents")).to_be_visible()
    await expect(page.locator("#sources")).to_contain_text("No sessions seen.")
    await page.context.close()


async def test_focus_is_visible_and_the_skip_link_comes_first(browser: Browser, site: Site) -> None:
    page = await _signed_in_page(browser, site, site.agent_a)
    await page.goto("/ui/harvest")  # a page without an autofocused field
    await page.keyboard.press("Tab")
    focused = page.locator(":focus")
    await expect(focused).to_have_text("Skip to content")
    outline = await focused.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline == "solid"
    await page.keyboard.press("Tab")
    await expect(page.locator(":focus")).to_have_text("Mnemo")  # then the page, in order
    await page.context.close()


# -- plain HTTP: cookies, CSRF, errors ------------------------------------------------------------------------


@pytest.fixture
async def admin_ui(site: Site) -> AsyncIterator[UiClient]:
    client = UiClient(site.url)
    signed = await client.sign_in(site.admin)
    assert signed.status_code == 303, signed.text
    yield client
    await client.close()


async def _token_count(site: Site) -> int:
    async with httpx.AsyncClient(base_url=site.url) as http:
        return len((await _ok(http, site.admin, "GET", "/api/v1/tokens"))["tokens"])


async def test_a_post_without_the_csrf_token_or_from_another_origin_is_refused(admin_ui: UiClient, site: Site) -> None:
    form = {"principal": "csrf-victim", "role": "agent", "workspaces": site.a, "label": ""}
    before = await _token_count(site)
    refusals = {
        "no csrf token": (form, None),
        "a wrong csrf token": ({**form, "csrf": "x" + admin_ui.csrf[1:]}, None),
        "another session's csrf token": ({**form, "csrf": await _other_session_csrf(site)}, None),
        "a foreign Origin": ({**form, "csrf": admin_ui.csrf}, {"Origin": "https://evil.example"}),
        "another local origin": ({**form, "csrf": admin_ui.csrf}, {"Origin": "http://127.0.0.1:1"}),
        "a foreign Referer and no Origin": ({**form, "csrf": admin_ui.csrf}, {"Referer": "https://evil.example/x"}),
        "neither Origin nor Referer": ({**form, "csrf": admin_ui.csrf}, {}),
    }
    for why, (data, headers) in refusals.items():
        answer = await admin_ui.post("/ui/tokens", data, headers)
        assert answer.status_code == 403, (why, answer.text)
        assert "Traceback" not in answer.text
    assert await _token_count(site) == before  # nothing was created
    # Positive control: the same POST with this session's token, from this origin, creates the token.
    made = await admin_ui.post("/ui/tokens", {**form, "csrf": admin_ui.csrf})
    assert made.status_code == 201, made.text
    assert "csrf-victim" in made.text and "mnemo_" in made.text
    assert await _token_count(site) == before + 1
    # Sign-out is a POST too: refused without the token, done with it.
    assert (await admin_ui.post("/ui/logout", {})).status_code == 403
    assert (await admin_ui.get("/ui/search")).status_code == 200
    assert (await admin_ui.post("/ui/logout", {"csrf": admin_ui.csrf})).status_code == 303
    assert (await admin_ui.get("/ui/search")).status_code == 303


async def _other_session_csrf(site: Site) -> str:
    other = UiClient(site.url)
    try:
        assert (await other.sign_in(site.agent_a)).status_code == 303
        return other.csrf
    finally:
        await other.close()


async def test_the_session_cookie_is_httponly_strict_signed_and_the_token_never_in_a_url(site: Site) -> None:
    client = UiClient(site.url)
    try:
        signed = await client.sign_in(site.agent_a)
        assert signed.status_code == 303
        assert site.agent_a not in signed.headers["location"]
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert "Path=/ui" in cookie and "Secure" not in cookie  # plain http here: Secure only over https
        assert (await client.get("/ui/search")).status_code == 200  # positive control: the cookie works
        # A cookie changed by one character is not a session.
        value = client.http.cookies["mnemo_ui"]
        client.http.cookies.clear()
        forged_value = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]
        forged = await client.http.get("/ui/search", headers={"Cookie": f"mnemo_ui={forged_value}"})
        assert forged.status_code == 303 and forged.headers["location"].startswith("/ui/login")
        # A bearer header is not a UI session either (the UI reads only its own cookie).
        headered = await client.http.get("/ui/search", headers={"Authorization": f"Bearer {site.agent_a}"})
        assert headered.status_code == 303
    finally:
        await client.close()


async def test_a_wrong_token_is_refused_at_sign_in(site: Site) -> None:
    client = UiClient(site.url)
    try:
        # Signing in is a POST like any other: without the sign-in page's CSRF token it is refused.
        forged = await client.post("/ui/login", {"token": site.agent_a})
        assert forged.status_code == 403
        assert (await client.get("/ui/search")).status_code == 303  # not signed in
        for bad in ("", "nonsense", site.agent_a + "x"):
            answer = await client.sign_in(bad)
            assert answer.status_code == 401, bad
            assert "not valid" in answer.text or "Enter a token" in answer.text
            assert "mnemo_ui" not in answer.headers.get("set-cookie", "") or "tok" not in answer.text
            assert (await client.get("/ui/search")).status_code == 303
        assert (await client.sign_in(site.agent_a)).status_code == 303  # positive control
    finally:
        await client.close()


async def test_bad_input_gets_a_clear_error_page(site: Site) -> None:
    client = UiClient(site.url)
    try:
        assert (await client.sign_in(site.agent_a)).status_code == 303
        cases = {
            "not a uuid": ("/ui/memories/not-a-uuid", {}, 400),
            "unknown memory": (f"/ui/memories/{uuid.uuid4()}", {}, 404),
            "bad as_of": (f"/ui/memories/{site.note}", {"as_of": "yesterday"}, 400),
            "bad mode": ("/ui/search", {"q": site.keyword, "mode": "psychic"}, 400),
            "bad kind": ("/ui/search", {"q": site.keyword, "kind": "poem"}, 400),
            "bad date": ("/ui/search", {"q": site.keyword, "created_after": "2026-13-45"}, 400),
            "no such page": ("/ui/nowhere", {}, 404),
            "NUL byte": ("/ui/search", {"q": "a\x00b"}, 400),
        }
        for why, (path, params, status) in cases.items():
            answer = await client.get(path, **params)
            assert answer.status_code == status, (why, answer.status_code, answer.text[:500])
            assert answer.headers["content-type"].startswith("text/html"), why
            assert "Traceback" not in answer.text and 'class="message"' in answer.text, why
        # Positive control: the same pages with good input.
        assert (await client.get(f"/ui/memories/{site.note}", as_of=site.t_mid)).status_code == 200
        assert site.keyword in (await client.get("/ui/search", q=site.keyword, mode="lexical", kind="decision")).text
    finally:
        await client.close()


async def test_local_mode_needs_no_sign_in_but_still_checks_posts(hash_stack: Stack) -> None:
    client = UiClient(hash_stack.base_url)
    try:
        page = await client.get("/ui/search")
        assert page.status_code == 200 and "local mode" in page.text
        # The local user is admin: the switcher offers every workspace, and searching it works.
        assert 'value="*"' in page.text
        everywhere = await client.get("/ui/search", q="anything at all", workspace="*")
        assert everywhere.status_code == 200 and 'id="results-h"' in everywhere.text
        assert "· every workspace" in everywhere.text.split('id="results-h"', 1)[1]  # the scope it searched
        login = await client.get("/ui/login")
        assert "local mode" in login.text and 'name="token"' not in login.text
        # The local user is admin: the tokens page is there. Revoking a token that does not exist changes nothing;
        # without the CSRF token it is refused before the services are asked, with it they answer 404.
        tokens = await client.get("/ui/tokens")
        assert tokens.status_code == 200
        unknown = f"/ui/tokens/{uuid.uuid4().hex[:12]}/revoke"
        refused = await client.post(unknown, {})
        assert refused.status_code == 403 and "CSRF" in refused.text
        foreign = await client.post(unknown, {"csrf": csrf_of(tokens.text)}, {"Origin": "http://localhost:1"})
        assert foreign.status_code == 403
        reached = await client.post(unknown, {"csrf": csrf_of(tokens.text)})
        assert reached.status_code == 404, reached.text  # positive control: past the checks, the service answers
    finally:
        await client.close()


# -- the review queue ------------------------------------------------------------------------------------------


async def _candidate(site: Site, text: str) -> str:
    """A candidate memory in A: written into a staged import batch (what a reviewer then confirms)."""
    async with httpx.AsyncClient(base_url=site.url, timeout=60) as http:
        batch = await _ok(
            http, site.admin, "POST", "/api/v1/imports", {"source": "ui-test", "staged": True, "workspace": site.a}
        )
        path = f"/api/v1/imports/{batch['batch']['id']}/memories:batch"
        written = await _ok(http, site.admin, "POST", path, {"items": [{"content": text}], "workspace": site.a})
    memory = written["results"][0]["memory"]
    assert memory["status"] == "candidate", memory
    return str(memory["id"])


async def _propose(site: Site, memory_id: str, reason: str) -> str:
    """A confirm proposal on the memory, opened by A's agent over REST (agents propose; they never decide)."""
    body = {"kind": "confirm", "memory_ids": [memory_id], "reason": reason, "workspace": site.a}
    async with httpx.AsyncClient(base_url=site.url) as http:
        made = await _ok(http, site.agent_a, "POST", "/api/v1/proposals", body)
    return str(made["proposal"]["id"])


async def _status(site: Site, memory_id: str) -> str:
    async with httpx.AsyncClient(base_url=site.url) as http:
        memory = await _ok(http, site.admin, "GET", f"/api/v1/memories/{memory_id}?workspace={site.a}")
    return str(memory["status"])


async def test_a_reviewer_accepts_a_proposal_and_reverses_it(browser: Browser, site: Site) -> None:
    memory_id = await _candidate(site, f"The {site.keyword} queue drains nightly.")
    proposal_id = await _propose(site, memory_id, "a DECISION: line in a session")
    assert await _status(site, memory_id) == "candidate"
    page = await _signed_in_page(browser, site, site.reviewer_a)
    await page.get_by_role("link", name="Review").click()
    row = page.locator(f"tr[data-proposal='{proposal_id}']")
    await expect(row).to_contain_text("a DECISION: line in a session")
    await expect(row).to_contain_text("open")
    await row.get_by_role("link", name="confirm").click()
    await expect(page.get_by_role("heading", level=1)).to_have_text("Proposal: confirm")
    await page.get_by_label("Reason (optional)").fill("read it, it holds")
    await page.get_by_role("button", name="Accept and apply").click()
    await expect(page.locator("#proposal-state")).to_have_text("applied")
    assert await _status(site, memory_id) == "confirmed"
    # The memory's own page says so too, with the change on its timeline.
    await page.locator("#proposal-memories a").first.click()
    await expect(page.locator("#memory-status")).to_have_text("confirmed")
    await expect(page.locator("#memory-proposals")).to_contain_text("applied")
    await page.go_back()
    await page.get_by_label("Reason (required)").fill("confirmed too early")
    await page.get_by_role("button", name="Reverse").click()
    await expect(page.locator("#proposal-state")).to_have_text("reversed")
    assert await _status(site, memory_id) == "candidate"
    await page.context.close()


async def test_an_agent_does_not_see_the_review_queue(browser: Browser, site: Site) -> None:
    memory_id = await _candidate(site, "Agents propose.")
    proposal_id = await _propose(site, memory_id, "agents propose, never decide")
    agent = await _signed_in_page(browser, site, site.agent_a)
    await expect(agent.get_by_role("link", name="Review")).to_have_count(0)
    await agent.goto(f"/ui/memories/{memory_id}?workspace={site.a}")
    await expect(agent.locator("#memory-status")).to_have_text("candidate")
    await expect(agent.locator("#memory-proposals")).to_have_count(0)  # its page lists no proposals either
    for path in ("/ui/review", f"/ui/review/{proposal_id}"):
        response = await agent.goto(path)
        assert response is not None and response.status == 403, path
        await expect(agent.locator(".message")).to_contain_text("needs the reviewer role; this token is agent")
        assert proposal_id not in await agent.content()
    await agent.context.close()
    # Positive control: A's reviewer sees the queue with that proposal in it.
    reviewer = await _signed_in_page(browser, site, site.reviewer_a)
    await reviewer.goto(f"/ui/review?workspace={site.a}")
    await expect(reviewer.locator(f"tr[data-proposal='{proposal_id}']")).to_be_visible()
    await reviewer.goto(f"/ui/memories/{memory_id}?workspace={site.a}")
    await expect(reviewer.locator("#memory-proposals")).to_contain_text("agents propose, never decide")
    await reviewer.context.close()


async def test_bulk_accept_and_reject(browser: Browser, site: Site) -> None:
    memories = [await _candidate(site, f"Bulk item {i} for {site.keyword}.") for i in range(3)]
    proposals = [await _propose(site, m, f"bulk {i}") for i, m in enumerate(memories)]
    page = await _signed_in_page(browser, site, site.reviewer_a)
    await page.goto(f"/ui/review?workspace={site.a}")
    for proposal_id in proposals[:2]:
        await page.get_by_label(f"Select proposal {proposal_id}").check()
    # Rejecting needs a reason: without one, nothing is decided.
    await page.get_by_role("button", name="Reject selected").click()
    await expect(page.locator(".message")).to_contain_text("a reason is required to reject")
    assert [await _status(site, m) for m in memories] == ["candidate"] * 3
    await page.goto(f"/ui/review?workspace={site.a}")
    for proposal_id in proposals[:2]:
        await page.get_by_label(f"Select proposal {proposal_id}").check()
    await page.get_by_label("Reason (required to reject)").fill("duplicates of older notes")
    await page.get_by_role("button", name="Reject selected").click()
    await expect(page.locator("#outcomes-h")).to_have_text("Decided 2 of 2")
    await page.get_by_label(f"Select proposal {proposals[2]}").check()
    await page.get_by_role("button", name="Accept selected").click()
    await expect(page.locator("#outcomes-h")).to_have_text("Decided 1 of 1")
    assert [await _status(site, m) for m in memories] == ["candidate", "candidate", "confirmed"]
    await page.context.close()


async def test_review_decisions_need_the_csrf_token_and_a_reason(site: Site) -> None:
    memory_id = await _candidate(site, "Decisions are POSTs.")
    proposal_id = await _propose(site, memory_id, "csrf check")
    client = UiClient(site.url)
    try:
        assert (await client.sign_in(site.reviewer_a)).status_code == 303
        accept = f"/ui/review/{proposal_id}/accept"
        assert (await client.post(accept, {"workspace": site.a})).status_code == 403
        foreign = {"Origin": "https://evil.example"}
        assert (await client.post(accept, {"workspace": site.a, "csrf": client.csrf}, foreign)).status_code == 403
        reject = f"/ui/review/{proposal_id}/reject"
        unreasoned = await client.post(reject, {"workspace": site.a, "csrf": client.csrf})
        assert unreasoned.status_code == 400 and "a reason is required" in unreasoned.text
        unknown = await client.post(f"/ui/review/{proposal_id}/approve", {"workspace": site.a, "csrf": client.csrf})
        assert unknown.status_code == 404
        assert await _status(site, memory_id) == "candidate"  # nothing was decided
        done = await client.post(accept, {"workspace": site.a, "csrf": client.csrf})
        assert done.status_code == 303, done.text  # positive control
        assert await _status(site, memory_id) == "confirmed"
        again = await client.post(accept, {"workspace": site.a, "csrf": client.csrf})
        assert again.status_code in (400, 409) and "Traceback" not in again.text  # decided already
    finally:
        await client.close()


async def test_a_revoked_tokens_session_ends_at_its_next_request(site: Site) -> None:
    async with httpx.AsyncClient(base_url=site.url) as http:
        body = {"principal": "short-lived-ui", "role": "agent", "workspaces": [site.a]}
        made = await _ok(http, site.admin, "POST", "/api/v1/tokens", body)
        client = UiClient(site.url)
        try:
            assert (await client.sign_in(made["secret"])).status_code == 303
            assert (await client.get("/ui/search", q=site.keyword)).status_code == 200  # positive control
            await _ok(http, site.admin, "DELETE", f"/api/v1/tokens/{made['token']['id']}")
            ended = await client.get("/ui/search", q=site.keyword)
            assert ended.status_code == 303 and ended.headers["location"] == "/ui/login?expired=1"
            assert 'mnemo_ui=""' in ended.headers["set-cookie"] or "Max-Age=0" in ended.headers["set-cookie"]
        finally:
            await client.close()


async def test_memory_text_is_escaped(site: Site) -> None:
    attack = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    async with httpx.AsyncClient(base_url=site.url) as http:
        written = await _ok(
            http, site.agent_a, "POST", "/api/v1/memories", {"title": attack, "content": f"{site.keyword} {attack}"}
        )
    client = UiClient(site.url)
    try:
        assert (await client.sign_in(site.agent_a)).status_code == 303
        for page in (
            await client.get(f"/ui/memories/{written['memory']['id']}"),
            await client.get("/ui/search", q=site.keyword),
        ):
            assert page.status_code == 200
            assert "&lt;script&gt;" in page.text  # positive control: the text is there, as text
            assert "<script>alert" not in page.text and "<img src=x" not in page.text
            assert "script-src 'self'" in page.headers["content-security-policy"]
    finally:
        await client.close()
