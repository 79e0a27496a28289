"""Small software-engineering tasks written for raas: little Python projects with one bug each, an
issue text, unittest tests, and the fix. The generator derives `gold_patch` with real git."""

SWE = []

def task(tid, issue, files, fixed, f2p, p2p):
    SWE.append(dict(id=tid, issue=issue, files=files, fixed=fixed, f2p=f2p, p2p=p2p))

INIT = ""

task("stats-median", "`stats.median` returns the wrong value for lists with an even number of elements: `median([1, 2, 3, 4])` gives 3 but should be 2.5 (the mean of the two middle values).", {
    "stats/__init__.py": INIT,
    "stats/core.py": '''"""Descriptive statistics."""


def mean(xs):
    if not xs:
        raise ValueError("mean of empty list")
    return sum(xs) / len(xs)


def median(xs):
    if not xs:
        raise ValueError("median of empty list")
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid]
''',
    "tests/__init__.py": INIT,
    "tests/test_core.py": '''import unittest

from stats.core import mean, median


class TestMean(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_empty(self):
        with self.assertRaises(ValueError):
            mean([])


class TestMedian(unittest.TestCase):
    def test_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)

    def test_even_pair(self):
        self.assertEqual(median([10, 20]), 15)
''',
}, {
    "stats/core.py": '''"""Descriptive statistics."""


def mean(xs):
    if not xs:
        raise ValueError("mean of empty list")
    return sum(xs) / len(xs)


def median(xs):
    if not xs:
        raise ValueError("median of empty list")
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2 == 0:
        return (s[mid - 1] + s[mid]) / 2
    return s[mid]
''',
}, ["tests.test_core.TestMedian.test_even", "tests.test_core.TestMedian.test_even_pair"],
   ["tests.test_core.TestMean.test_mean", "tests.test_core.TestMean.test_empty", "tests.test_core.TestMedian.test_odd"])

task("leap-year", "`calendar_utils.is_leap(2000)` returns False, but 2000 was a leap year: years divisible by 400 are leap years even though they are divisible by 100.", {
    "calendar_utils/__init__.py": "from .leap import is_leap, days_in_year\n",
    "calendar_utils/leap.py": '''def is_leap(year):
    """Gregorian leap year rule."""
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_year(year):
    return 366 if is_leap(year) else 365
''',
    "tests/__init__.py": INIT,
    "tests/test_leap.py": '''import unittest

from calendar_utils import is_leap, days_in_year


class TestLeap(unittest.TestCase):
    def test_common(self):
        self.assertFalse(is_leap(2023))
        self.assertTrue(is_leap(2024))

    def test_century(self):
        self.assertFalse(is_leap(1900))

    def test_400(self):
        self.assertTrue(is_leap(2000))
        self.assertTrue(is_leap(1600))

    def test_days(self):
        self.assertEqual(days_in_year(2000), 366)
''',
}, {
    "calendar_utils/leap.py": '''def is_leap(year):
    """Gregorian leap year rule."""
    if year % 400 == 0:
        return True
    if year % 100 == 0:
        return False
    return year % 4 == 0


def days_in_year(year):
    return 366 if is_leap(year) else 365
''',
}, ["tests.test_leap.TestLeap.test_400", "tests.test_leap.TestLeap.test_days"],
   ["tests.test_leap.TestLeap.test_common", "tests.test_leap.TestLeap.test_century"])

task("cart-discount", "`Cart.total()` with a discount is wrong: a cart worth 100 with `discount=0.2` totals 20 instead of 80. The discount is a fraction to take off the price.", {
    "shop/__init__.py": INIT,
    "shop/cart.py": '''class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, price, qty=1):
        if price < 0 or qty < 1:
            raise ValueError("bad item")
        self.items.append((name, price, qty))

    def subtotal(self):
        return sum(price * qty for _, price, qty in self.items)

    def total(self, discount=0.0):
        if not 0 <= discount <= 1:
            raise ValueError("discount must be within [0, 1]")
        return round(self.subtotal() * discount, 2)
''',
    "tests/__init__.py": INIT,
    "tests/test_cart.py": '''import unittest

from shop.cart import Cart


class TestCart(unittest.TestCase):
    def setUp(self):
        self.cart = Cart()
        self.cart.add("book", 40, 2)
        self.cart.add("pen", 20)

    def test_subtotal(self):
        self.assertEqual(self.cart.subtotal(), 100)

    def test_bad_item(self):
        with self.assertRaises(ValueError):
            self.cart.add("x", -1)

    def test_discount(self):
        self.assertEqual(self.cart.total(0.2), 80)

    def test_no_discount(self):
        self.assertEqual(self.cart.total(), 100)
''',
}, {
    "shop/cart.py": '''class Cart:
    def __init__(self):
        self.items = []

    def add(self, name, price, qty=1):
        if price < 0 or qty < 1:
            raise ValueError("bad item")
        self.items.append((name, price, qty))

    def subtotal(self):
        return sum(price * qty for _, price, qty in self.items)

    def total(self, discount=0.0):
        if not 0 <= discount <= 1:
            raise ValueError("discount must be within [0, 1]")
        return round(self.subtotal() * (1 - discount), 2)
''',
}, ["tests.test_cart.TestCart.test_discount", "tests.test_cart.TestCart.test_no_discount"],
   ["tests.test_cart.TestCart.test_subtotal", "tests.test_cart.TestCart.test_bad_item"])

task("ring-buffer", "`RingBuffer` loses data: after pushing 3 items into a buffer of capacity 3, `items()` returns only 2 of them, and pushing more wraps at the wrong place.", {
    "ring/__init__.py": "from .buffer import RingBuffer\n",
    "ring/buffer.py": '''class RingBuffer:
    """Fixed-capacity buffer that overwrites the oldest item when full."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.data = [None] * capacity
        self.start = 0
        self.size = 0

    def push(self, item):
        end = (self.start + self.size) % self.capacity
        self.data[end] = item
        if self.size < self.capacity - 1:
            self.size += 1
        else:
            self.start = (self.start + 1) % self.capacity

    def items(self):
        return [self.data[(self.start + i) % self.capacity] for i in range(self.size)]

    def __len__(self):
        return self.size
''',
    "tests/__init__.py": INIT,
    "tests/test_buffer.py": '''import unittest

from ring import RingBuffer


class TestRing(unittest.TestCase):
    def test_bad_capacity(self):
        with self.assertRaises(ValueError):
            RingBuffer(0)

    def test_partial(self):
        r = RingBuffer(3)
        r.push(1)
        self.assertEqual(r.items(), [1])

    def test_full(self):
        r = RingBuffer(3)
        for x in (1, 2, 3):
            r.push(x)
        self.assertEqual(r.items(), [1, 2, 3])

    def test_wrap(self):
        r = RingBuffer(3)
        for x in range(1, 6):
            r.push(x)
        self.assertEqual(r.items(), [3, 4, 5])
        self.assertEqual(len(r), 3)
''',
}, {
    "ring/buffer.py": '''class RingBuffer:
    """Fixed-capacity buffer that overwrites the oldest item when full."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.data = [None] * capacity
        self.start = 0
        self.size = 0

    def push(self, item):
        end = (self.start + self.size) % self.capacity
        self.data[end] = item
        if self.size < self.capacity:
            self.size += 1
        else:
            self.start = (self.start + 1) % self.capacity

    def items(self):
        return [self.data[(self.start + i) % self.capacity] for i in range(self.size)]

    def __len__(self):
        return self.size
''',
}, ["tests.test_buffer.TestRing.test_full", "tests.test_buffer.TestRing.test_wrap"],
   ["tests.test_buffer.TestRing.test_bad_capacity", "tests.test_buffer.TestRing.test_partial"])

task("roman-numerals", "`to_roman(90)` returns 'LXXXX' and `to_roman(40)` returns 'XXXX'; they should be 'XC' and 'XL'.", {
    "roman/__init__.py": "from .convert import to_roman, from_roman\n",
    "roman/convert.py": '''VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
    (50, "L"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]


def to_roman(n):
    if not 0 < n < 4000:
        raise ValueError("out of range")
    out = []
    for value, sym in VALUES:
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


def from_roman(s):
    table = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = table[ch]
        if i + 1 < len(s) and table[s[i + 1]] > v:
            total -= v
        else:
            total += v
    return total
''',
    "tests/__init__.py": INIT,
    "tests/test_convert.py": '''import unittest

from roman import to_roman, from_roman


class TestRoman(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(to_roman(3), "III")
        self.assertEqual(to_roman(1994), "MCMXCIV")

    def test_tens(self):
        self.assertEqual(to_roman(90), "XC")
        self.assertEqual(to_roman(40), "XL")

    def test_round_trip(self):
        for n in range(1, 400):
            self.assertEqual(from_roman(to_roman(n)), n)

    def test_parse(self):
        self.assertEqual(from_roman("XLII"), 42)
''',
}, {
    "roman/convert.py": '''VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"),
    (90, "XC"), (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]


def to_roman(n):
    if not 0 < n < 4000:
        raise ValueError("out of range")
    out = []
    for value, sym in VALUES:
        while n >= value:
            out.append(sym)
            n -= value
    return "".join(out)


def from_roman(s):
    table = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
    total = 0
    for i, ch in enumerate(s):
        v = table[ch]
        if i + 1 < len(s) and table[s[i + 1]] > v:
            total -= v
        else:
            total += v
    return total
''',
}, ["tests.test_convert.TestRoman.test_tens", "tests.test_convert.TestRoman.test_simple"],
   ["tests.test_convert.TestRoman.test_parse", "tests.test_convert.TestRoman.test_round_trip"])

task("account-withdraw", "Withdrawing the whole balance fails: `Account(50).withdraw(50)` raises InsufficientFunds, but emptying an account should be allowed.", {
    "bank/__init__.py": INIT,
    "bank/account.py": '''class InsufficientFunds(Exception):
    pass


class Account:
    def __init__(self, balance=0):
        self.balance = balance

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount

    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("withdrawal must be positive")
        if amount >= self.balance:
            raise InsufficientFunds(amount)
        self.balance -= amount
''',
    "tests/__init__.py": INIT,
    "tests/test_account.py": '''import unittest

from bank.account import Account, InsufficientFunds


class TestAccount(unittest.TestCase):
    def test_deposit(self):
        a = Account()
        a.deposit(10)
        self.assertEqual(a.balance, 10)

    def test_overdraw(self):
        with self.assertRaises(InsufficientFunds):
            Account(5).withdraw(6)

    def test_withdraw_all(self):
        a = Account(50)
        a.withdraw(50)
        self.assertEqual(a.balance, 0)
''',
}, {
    "bank/account.py": '''class InsufficientFunds(Exception):
    pass


class Account:
    def __init__(self, balance=0):
        self.balance = balance

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount

    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("withdrawal must be positive")
        if amount > self.balance:
            raise InsufficientFunds(amount)
        self.balance -= amount
''',
}, ["tests.test_account.TestAccount.test_withdraw_all"],
   ["tests.test_account.TestAccount.test_deposit", "tests.test_account.TestAccount.test_overdraw"])

task("paginate", "`paginate(items, page, per_page)` drops the last item of every page: `paginate(list(range(10)), 1, 3)` returns [0, 1] instead of [0, 1, 2]. Pages are numbered from 1.", {
    "pager/__init__.py": "from .pages import paginate, page_count\n",
    "pager/pages.py": '''import math


def page_count(n_items, per_page):
    if per_page < 1:
        raise ValueError("per_page must be positive")
    return max(1, math.ceil(n_items / per_page))


def paginate(items, page, per_page):
    if page < 1:
        raise ValueError("pages start at 1")
    start = (page - 1) * per_page
    return [items[i] for i in range(start, min(start + per_page - 1, len(items)))]
''',
    "tests/__init__.py": INIT,
    "tests/test_pages.py": '''import unittest

from pager import paginate, page_count


class TestPages(unittest.TestCase):
    def test_count(self):
        self.assertEqual(page_count(10, 3), 4)
        self.assertEqual(page_count(0, 3), 1)

    def test_first_page(self):
        self.assertEqual(paginate(list(range(10)), 1, 3), [0, 1, 2])

    def test_last_page(self):
        self.assertEqual(paginate(list(range(10)), 4, 3), [9])

    def test_bad_page(self):
        with self.assertRaises(ValueError):
            paginate([1], 0, 3)
''',
}, {
    "pager/pages.py": '''import math


def page_count(n_items, per_page):
    if per_page < 1:
        raise ValueError("per_page must be positive")
    return max(1, math.ceil(n_items / per_page))


def paginate(items, page, per_page):
    if page < 1:
        raise ValueError("pages start at 1")
    start = (page - 1) * per_page
    return [items[i] for i in range(start, min(start + per_page, len(items)))]
''',
}, ["tests.test_pages.TestPages.test_first_page"],
   ["tests.test_pages.TestPages.test_count", "tests.test_pages.TestPages.test_bad_page", "tests.test_pages.TestPages.test_last_page"])

task("word-freq", "`top_words(text, k)` counts words case-sensitively, so 'The' and 'the' are counted separately; words should be compared in lower case.", {
    "textstats/__init__.py": INIT,
    "textstats/freq.py": '''import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def words(text):
    return WORD.findall(text)


def top_words(text, k):
    if k < 1:
        raise ValueError("k must be positive")
    counts = Counter(words(text))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
''',
    "tests/__init__.py": INIT,
    "tests/test_freq.py": '''import unittest

from textstats.freq import top_words, words


class TestFreq(unittest.TestCase):
    def test_words(self):
        self.assertEqual(words("a b, c!"), ["a", "b", "c"])

    def test_case(self):
        self.assertEqual(top_words("The cat and the hat. THE end", 1), [("the", 3)])

    def test_ties(self):
        self.assertEqual(top_words("b a b a c", 2), [("a", 2), ("b", 2)])

    def test_bad_k(self):
        with self.assertRaises(ValueError):
            top_words("x", 0)
''',
}, {
    "textstats/freq.py": '''import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def words(text):
    return WORD.findall(text)


def top_words(text, k):
    if k < 1:
        raise ValueError("k must be positive")
    counts = Counter(w.lower() for w in words(text))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]
''',
}, ["tests.test_freq.TestFreq.test_case"],
   ["tests.test_freq.TestFreq.test_words", "tests.test_freq.TestFreq.test_ties", "tests.test_freq.TestFreq.test_bad_k"])
