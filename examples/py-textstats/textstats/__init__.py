"""Small text statistics."""


def word_count(text):
    """Return the number of whitespace-separated words in text."""
    return len(text.split(" "))


def longest_word(text):
    """Return the longest word, or "" when there is none."""
    words = text.split()
    if not words:
        return ""
    return max(words, key=len)
