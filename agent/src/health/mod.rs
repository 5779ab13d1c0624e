//! Health: the numbers from Warden reads, in the chat.

pub mod chat;
