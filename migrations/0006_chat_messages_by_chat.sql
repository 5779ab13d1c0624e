-- A tap on a message whose buttons the server took off (it answered the
-- message) is told "already answered": found by the chat and Telegram's
-- id of the message, not by walking every message of the server.
CREATE INDEX chat_messages_by_chat ON chat_messages (chat_id, telegram_id);
