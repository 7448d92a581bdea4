"""What the rules' browser tests share."""
from playwright.sync_api import Page

from tests.e2e.browser import log_in, open_conversation, start, wait_for_live, wait_for_pending


def opened(page: Page, api, alice, text: str) -> str:
    """A conversation started with `text` and waiting for one call, open on `page` as alice, live."""
    conversation_id = start(api, text)
    wait_for_pending(conversation_id, 1)
    log_in(page, alice)
    open_conversation(page, conversation_id)
    wait_for_live(page)
    return conversation_id
