"""What a message asks back (ombre_brain/asking.py): the write decision keeps nothing of its user side."""

from __future__ import annotations

import pytest

from ombre_brain.asking import asks_to_recall


@pytest.mark.parametrize("text, asks", [
    ("豆豆是哪天生日来着，医生问我", True), ("你还记得我家狗叫啥吗，同事问我", True), ("我现在是一个人住对吧", True),
    ("hey, what's my dog's name again", True), ("彤彤搬走了，新室友是个男生，叫什么来着", False),
    ("what do i do now, i just got fired", False), ("我跟男朋友分手了，我做得对吧", False),
    ("so what was the name of the shelter", True), ("do you remember what the vet said", True),
    ("where did i work before this job", True), ("what's Delia's husband called again", True),
    ("我家狗叫豆豆", False), ("我之前说过我要换工作，现在定了", False), ("which means i work from home now", False),
    ("how i met him is a long story", False), ("I told you my sister lives in Leeds", False),
    ("did I tell you I'm coeliac? so wedding food is an adventure", False),
])
def test_what_asks_to_be_reminded(text, asks):
    assert asks_to_recall(text) is asks
