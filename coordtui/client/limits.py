"""The server's documented length limits (characters, counted as the server counts), so forms can
show a counter and refuse locally what the server would refuse or cut."""
MESSAGE_TITLE = 255
MESSAGE_BODY = 10_000
CHAT_BODY = 10_000
TASK_TITLE = 255
TASK_DETAIL = 20_000
TASK_REASON = 1_000
LINK_TITLE = 255
LINK_URL = 2_000
LINK_DESCRIPTION = 10_000
PAGE_TITLE = 255
