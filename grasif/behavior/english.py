"""English for the instructions: number words, plurals (irregular words, mass nouns and their
units), lists joined with "and"/"or", and the prepositions of ``ontop``/``inside``.

Functions of strings only. Used by :mod:`grasif.behavior.instruction`.
"""

from __future__ import annotations

import re

_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
#: Plural of the last word where the usual rules fail.
_IRREGULAR = {"die": "dice", "knife": "knives", "pocketknife": "pocketknives", "leaf": "leaves", "shelf": "shelves",
              "half": "halves", "cactus": "cacti", "potato": "potatoes", "tomato": "tomatoes", "mango": "mangoes"}
#: Mass nouns and the unit that counts them ("three pieces of money").
_MASS = {"money": "piece", "mail": "piece", "silver": "piece", "ice": "piece", "paraffin": "piece", "postage": "piece",
         "paper": "sheet", "turf": "piece", "firewood": "piece", "bait": "piece", "fishing gear": "piece",
         "toilet tissue": "roll", "plywood": "piece", "lettuce": "head", "spinach": "bunch", "chard": "bunch",
         "bok choy": "head", "sweet corn": "ear", "sushi": "piece", "toast": "slice", "cheddar": "piece",
         "swiss cheese": "piece", "broken glass": "piece", "sports equipment": "piece", "wrapping paper": "sheet",
         "broccoli": "head", "tights": "pair", "sunglasses": "pair", "shears": "pair", "pliers": "pair",
         "undergarment": "piece"}


def number_word(n: int) -> str:
    """``4`` → ``four`` up to twenty, digits above."""
    return _NUMBER_WORDS[n] if 0 <= n < len(_NUMBER_WORDS) else str(n)


def class_words(cls: str) -> str:
    """``bottle__of__perfume`` → ``bottle of perfume``."""
    return re.sub(r"_+", " ", cls).strip()


def _plural_word(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if re.search(r"(s|x|z|ch|sh)$", word):
        return word + "es"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    return word + "s"


def plural_phrase(words: str) -> str:
    """Plural noun phrase: ``bottle of perfume`` → ``bottles of perfume``; mass nouns take their unit."""
    if words in _MASS:
        return f"{_plural_word(_MASS[words])} of {words}"
    head, sep, tail = words.partition(" of ")
    parts = head.split(" ")
    parts[-1] = _plural_word(parts[-1])
    return " ".join(parts) + sep + tail


def one_phrase(words: str) -> str:
    """``one candle``, ``one piece of swiss cheese``."""
    return f"one {_MASS[words]} of {words}" if words in _MASS else f"one {words}"


def join_list(items: list[str], word: str = "and") -> str:
    """``a, b and c`` (``word`` before the last item)."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + f" {word} " + items[-1]


#: The preposition of each placement predicate.
PREPOSITIONS = {"ontop": "on", "inside": "inside"}
