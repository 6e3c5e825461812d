"""The demo: a tiny GPT trained through real instabilities, without and with the guard."""
