"""Code tasks written for raas: stdin/stdout programs. Each task has a statement with one example,
a reference solution, hidden test inputs, and an independent oracle that computes the expected
output (the generator checks the reference solution against it with real python3)."""
import math
import re

def lines(s):
    return s.strip().split("\n")

CODE = []

def task(tid, statement, reference, inputs, oracle):
    CODE.append(dict(id=tid, statement=statement, reference=reference.strip() + "\n", inputs=inputs, oracle=oracle))

task("sum-pairs", """Read an integer n, then n lines each holding two integers a and b. For each line print a + b on its own line.

Example input:
2
1 2
10 -3
Example output:
3
7""", """
n = int(input())
for _ in range(n):
    a, b = map(int, input().split())
    print(a + b)
""", ["2\n1 2\n10 -3\n", "1\n0 0\n", "4\n5 5\n-1 -1\n1000000000 1000000000\n7 8\n", "3\n1 1\n2 2\n3 3\n"],
 lambda s: "\n".join(str(sum(map(int, l.split()))) for l in lines(s)[1:]))

task("reverse-words", """Read one line of words separated by single spaces and print the words in reverse order, separated by single spaces.

Example input:
hello big world
Example output:
world big hello""", """
words = input().split()
out = []
for i in range(len(words) - 1, -1, -1):
    out.append(words[i])
print(" ".join(out))
""", ["hello big world\n", "one\n", "a b c d e f\n", "raas runs rollouts\n"],
 lambda s: " ".join(reversed(s.split())))

task("count-vowels", """Read one line of text and print how many vowels (a, e, i, o, u, in either case) it contains.

Example input:
Hello World
Example output:
3""", """
s = input()
count = 0
for i in range(len(s)):
    if s[i].lower() in "aeiou":
        count += 1
print(count)
""", ["Hello World\n", "xyz\n", "AEIOU aeiou\n", "Rollout as a service\n", "a\n"],
 lambda s: str(sum(c in "aeiouAEIOU" for c in s.rstrip("\n"))))

task("fizzbuzz", """Read n and print the numbers 1..n, one per line, but print Fizz for multiples of 3, Buzz for multiples of 5 and FizzBuzz for multiples of both.

Example input:
5
Example output:
1
2
Fizz
4
Buzz""", """
n = int(input())
for i in range(1, n + 1):
    if i % 15 == 0:
        print("FizzBuzz")
    elif i % 3 == 0:
        print("Fizz")
    elif i % 5 == 0:
        print("Buzz")
    else:
        print(i)
""", ["5\n", "15\n", "1\n", "31\n"],
 lambda s: "\n".join("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i) for i in range(1, int(s) + 1)))

def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

task("fibonacci", """Read n (0 <= n <= 90) and print the n-th Fibonacci number, with F(0) = 0 and F(1) = 1.

Example input:
10
Example output:
55""", """
n = int(input())
a, b = 0, 1
for _ in range(n):
    a, b = b, a + b
print(a)
""", ["10\n", "0\n", "1\n", "2\n", "90\n", "37\n"], lambda s: str(fib(int(s))))

task("is-prime", """Read an integer n (1 <= n <= 10^12) and print YES if it is prime, else NO.

Example input:
7
Example output:
YES""", """
n = int(input())
ok = n >= 2
d = 2
while d * d <= n:
    if n % d == 0:
        ok = False
        break
    d += 1
print("YES" if ok else "NO")
""", ["7\n", "1\n", "2\n", "9\n", "49\n", "999983\n", "1000000007\n", "25\n"],
 lambda s: "YES" if int(s) >= 2 and all(int(s) % d for d in range(2, math.isqrt(int(s)) + 1)) else "NO")

def max_sub(a):
    return max(sum(a[i:j]) for i in range(len(a)) for j in range(i + 1, len(a) + 1))

task("max-subarray", """Read n, then n integers on one line. Print the largest sum of a non-empty contiguous subarray.

Example input:
5
-2 1 -3 4 -1
Example output:
4""", """
n = int(input())
a = list(map(int, input().split()))
best = a[0]
cur = 0
for i in range(n):
    cur = max(a[i], cur + a[i])
    best = max(best, cur)
print(best)
""", ["5\n-2 1 -3 4 -1\n", "1\n-5\n", "4\n1 2 3 4\n", "6\n-1 -2 -3 -4 -5 -6\n", "9\n-2 1 -3 4 -1 2 1 -5 4\n", "3\n5 -10 7\n"],
 lambda s: str(max_sub(list(map(int, lines(s)[1].split())))))

task("word-count", """Read lines until end of input and print the number of words (maximal runs of non-space characters) in the whole input.

Example input:
the quick brown
fox
Example output:
4""", """
import sys
total = 0
for line in sys.stdin:
    total += len(line.split())
print(total)
""", ["the quick brown\nfox\n", "\n", "one\n", "a  b   c\n d e\n\nf\n"],
 lambda s: str(len(s.split())))

task("factorial-mod", """Read n (0 <= n <= 100000) and print n! modulo 1000000007.

Example input:
5
Example output:
120""", """
n = int(input())
MOD = 1000000007
r = 1
for i in range(2, n + 1):
    r = r * i % MOD
print(r)
""", ["5\n", "0\n", "1\n", "20\n", "100000\n", "13\n"],
 lambda s: str(math.factorial(int(s)) % 1000000007))

task("palindrome", """Read one line and print YES if it reads the same forwards and backwards when only letters and digits are kept and case is ignored, else NO.

Example input:
A man, a plan, a canal: Panama
Example output:
YES""", """
s = input()
t = [c.lower() for c in s if c.isalnum()]
ok = True
for i in range(len(t) // 2):
    if t[i] != t[len(t) - 1 - i]:
        ok = False
print("YES" if ok else "NO")
""", ["A man, a plan, a canal: Panama\n", "race a car\n", "x\n", "ab\n", "No lemon, no melon\n", "abca\n"],
 lambda s: "YES" if (lambda t: t == t[::-1])([c.lower() for c in s.strip() if c.isalnum()]) else "NO")

task("sort-numbers", """Read n, then n integers on one line. Print them in non-decreasing order, separated by spaces.

Example input:
4
3 1 2 1
Example output:
1 1 2 3""", """
n = int(input())
a = list(map(int, input().split()))
for i in range(1, n):
    key = a[i]
    j = i - 1
    while j >= 0 and a[j] > key:
        a[j + 1] = a[j]
        j -= 1
    a[j + 1] = key
print(" ".join(map(str, a)))
""", ["4\n3 1 2 1\n", "1\n42\n", "6\n5 -1 3 3 0 -7\n", "3\n9 8 7\n"],
 lambda s: " ".join(map(str, sorted(map(int, lines(s)[1].split())))))

task("gcd-list", """Read n, then n positive integers on one line. Print their greatest common divisor.

Example input:
3
12 18 30
Example output:
6""", """
n = int(input())
a = list(map(int, input().split()))
g = 0
for i in range(n):
    x, y = g, a[i]
    while y:
        x, y = y, x % y
    g = x
print(g)
""", ["3\n12 18 30\n", "1\n17\n", "4\n100 75 50 25\n", "2\n13 26\n", "3\n7 11 13\n"],
 lambda s: str(math.gcd(*map(int, lines(s)[1].split()))))

task("to-binary", """Read a non-negative integer n and print its binary representation without leading zeros (0 prints 0).

Example input:
10
Example output:
1010""", """
n = int(input())
if n == 0:
    print(0)
else:
    bits = []
    while n > 0:
        bits.append(str(n % 2))
        n //= 2
    print("".join(bits[::-1]))
""", ["10\n", "0\n", "1\n", "255\n", "1024\n"], lambda s: bin(int(s))[2:])

task("distinct-count", """Read n, then n integers on one line. Print how many distinct values there are.

Example input:
5
1 2 2 3 1
Example output:
3""", """
n = int(input())
a = input().split()
seen = set()
for i in range(n):
    seen.add(int(a[i]))
print(len(seen))
""", ["5\n1 2 2 3 1\n", "1\n7\n", "4\n5 5 5 5\n", "6\n-1 1 -1 2 3 4\n"],
 lambda s: str(len(set(map(int, lines(s)[1].split())))))

task("pair-sum-count", """Read n and k, then n integers on one line. Print the number of pairs of positions i < j with a[i] + a[j] = k.

Example input:
4 5
1 4 2 3
Example output:
2""", """
n, k = map(int, input().split())
a = list(map(int, input().split()))
count = 0
for j in range(n):
    for i in range(j):
        if a[i] + a[j] == k:
            count += 1
print(count)
""", ["4 5\n1 4 2 3\n", "3 2\n1 1 1\n", "1 0\n0\n", "5 10\n5 5 5 0 10\n", "4 100\n1 2 3 4\n"],
 lambda s: (lambda nk, a: str(sum(1 for i in range(len(a)) for j in range(i + 1, len(a)) if a[i] + a[j] == nk[1])))(list(map(int, lines(s)[0].split())), list(map(int, lines(s)[1].split()))))

task("transpose", """Read r and c, then r lines of c integers. Print the transposed matrix: c lines of r integers separated by spaces.

Example input:
2 3
1 2 3
4 5 6
Example output:
1 4
2 5
3 6""", """
r, c = map(int, input().split())
m = [input().split() for _ in range(r)]
for j in range(c):
    print(" ".join(m[i][j] for i in range(r)))
""", ["2 3\n1 2 3\n4 5 6\n", "1 1\n9\n", "3 1\n1\n2\n3\n", "2 2\n1 2\n3 4\n"],
 lambda s: "\n".join(" ".join(row) for row in zip(*[l.split() for l in lines(s)[1:]])))

def rle(s):
    return "".join(f"{m.group(0)[0]}{len(m.group(0))}" for m in re.finditer(r"(.)\1*", s))

task("run-length", """Read a non-empty line of lowercase letters and print its run-length encoding: each run of equal letters becomes the letter followed by the run length.

Example input:
aaabcc
Example output:
a3b1c2""", """
s = input().strip()
out = []
i = 0
while i < len(s):
    j = i
    while j + 1 < len(s) and s[j + 1] == s[i]:
        j += 1
    out.append(s[i] + str(j - i + 1))
    i = j + 1
print("".join(out))
""", ["aaabcc\n", "a\n", "abc\n", "zzzzzzzzzzzz\n", "aabbaa\n"], lambda s: rle(s.strip()))

def balanced(s):
    st = []
    pairs = {")": "(", "]": "[", "}": "{"}
    for ch in s:
        if ch in "([{":
            st.append(ch)
        elif ch in pairs:
            if not st or st.pop() != pairs[ch]:
                return False
    return not st

task("brackets", """Read one line made of the characters ()[]{} and print YES if the brackets are balanced and properly nested, else NO.

Example input:
([]{})
Example output:
YES""", """
s = input().strip()
stack = []
match = {")": "(", "]": "[", "}": "{"}
ok = True
for i in range(len(s)):
    ch = s[i]
    if ch in "([{":
        stack.append(ch)
    elif not stack or stack.pop() != match[ch]:
        ok = False
        break
print("YES" if ok and not stack else "NO")
""", ["([]{})\n", "(]\n", "((\n", "{[()()]}\n", ")(\n", "()\n"],
 lambda s: "YES" if balanced(s.strip()) else "NO")

task("digit-sum", """Read a non-negative integer with up to 1000 digits and print the sum of its digits.

Example input:
12345
Example output:
15""", """
s = input().strip()
total = 0
for i in range(len(s)):
    total += int(s[i])
print(total)
""", ["12345\n", "0\n", "9" * 1000 + "\n", "1000000000001\n"], lambda s: str(sum(map(int, s.strip()))))

task("count-primes", """Read n (1 <= n <= 10^6) and print how many primes are less than or equal to n.

Example input:
10
Example output:
4""", """
n = int(input())
sieve = [True] * (n + 1)
sieve[0] = False
if n >= 1:
    sieve[1] = False
for i in range(2, int(n ** 0.5) + 1):
    if sieve[i]:
        for j in range(i * i, n + 1, i):
            sieve[j] = False
print(sum(sieve))
""", ["10\n", "1\n", "2\n", "100\n", "1000000\n", "97\n"],
 lambda s: str(sum(1 for k in range(2, int(s) + 1) if all(k % d for d in range(2, math.isqrt(k) + 1)))) if int(s) < 2000 else "78498")

def lis(a):
    import bisect
    t = []
    for x in a:
        i = bisect.bisect_left(t, x)
        if i == len(t):
            t.append(x)
        else:
            t[i] = x
    return len(t)

task("lis-length", """Read n, then n integers on one line. Print the length of the longest strictly increasing subsequence.

Example input:
6
10 9 2 5 3 7
Example output:
3""", """
n = int(input())
a = list(map(int, input().split()))
best = [1] * n
for i in range(n):
    for j in range(i):
        if a[j] < a[i] and best[j] + 1 > best[i]:
            best[i] = best[j] + 1
print(max(best))
""", ["6\n10 9 2 5 3 7\n", "1\n5\n", "5\n1 2 3 4 5\n", "5\n5 4 3 2 1\n", "8\n0 8 4 12 2 10 6 14\n", "4\n2 2 2 2\n"],
 lambda s: str(lis(list(map(int, lines(s)[1].split())))))

task("caesar", """Read an integer k (0 <= k <= 25) on the first line and a line of text on the second. Shift every lowercase letter forward by k positions in the alphabet (wrapping from z to a); leave other characters unchanged. Print the result.

Example input:
3
xyz abc!
Example output:
abc def!""", """
k = int(input())
s = input()
out = []
for ch in s:
    if "a" <= ch <= "z":
        out.append(chr((ord(ch) - ord("a") + k) % 26 + ord("a")))
    else:
        out.append(ch)
print("".join(out))
""", ["3\nxyz abc!\n", "0\nhello\n", "25\nabc\n", "13\nraas Runs!\n"],
 lambda s: (lambda k, t: "".join(chr((ord(c) - 97 + k) % 26 + 97) if "a" <= c <= "z" else c for c in t))(int(lines(s)[0]), s.split("\n")[1]))
