from textstats import longest_word, word_count


def test_word_count_simple():
    assert word_count("a b c") == 3


def test_word_count_extra_spaces():
    assert word_count("  a   b  ") == 2


def test_word_count_empty():
    assert word_count("") == 0


def test_longest_word():
    assert longest_word("a bbb cc") == "bbb"
    assert longest_word("") == ""
