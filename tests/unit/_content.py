"""Generated text of every content class the estimate must bound (issue 28, "Estimates by
content"): prose in Chinese, Japanese, Korean and English, code, file paths, JSON, logs,
base64, emoji, combining marks, control characters, tables padded with non-breaking spaces
and runs of whitespace. ``sample(kind, seed, chars)`` is deterministic per seed; nothing here
calls the package.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable


def _words(text: str) -> list[str]:
    return text.split()


_ZH_WORDS = _words(
    "我们 上下文 窗口 是 有限 的 对话 越来 越长 消息 历史 越大 工具 调用 结果 尤其 占 空间 "
    "一次 可能 返回 几千 行 日志 读回 一整个 文件 聊着 就 逼近 模型 上限 到了 会 怎样 要么 "
    "直接 报错 开始 忘事 早期 内容 被 挤出 注意力 范围 回答 前后 矛盾 长时间 工作 后 提示 "
    "压缩 这个 问题 需要 解决 方法 很多 其中 最 简单 就是 把 旧的 删掉 但是 这样 会 丢失 "
    "重要 信息 所以 我们 先 归档 再 替换 用户 任务 约束 保留 摘要 生成 总结 之前 步骤 "
    "已经 完成 还 没有 下一步 计划 系统 设计 实现 测试 数据 代码 运行 环境 服务器 网络 "
    "时间 成本 性能 质量 目标 原因 因为 如果 那么 虽然 不过 而且 或者 以及 通过 进行 "
    "能够 应该 必须 发现 认为 知道 觉得 看到 今天 明天 公司 产品 客户 市场 中国 北京"
)

_JA_WORDS = _words(
    "私たち は コンテキスト ウィンドウ が 有限 です 会話 が 長く なる と メッセージ の "
    "履歴 も 大きく なります ツール の 結果 は 特に 場所 を 取ります 一度 の 実行 で 数千 "
    "行 の ログ が 返って くる こと も あります 上限 に 達する と エラー に なる か モデル "
    "が 忘れ 始めます だから 古い もの を 要約 して 保存 します タスク と 制約 は 残します "
    "東京 大阪 会社 仕事 今日 明日 問題 解決 方法 テスト データ サーバー ネットワーク "
    "ファイル を 読み込む 書き込む 確認 して ください ありがとう ございます"
)

_KO_WORDS = _words(
    "우리는 컨텍스트 창이 유한하다는 것을 알고 있습니다 대화가 길어질수록 메시지 기록도 "
    "커집니다 도구 호출 결과는 특히 공간을 많이 차지합니다 한 번의 실행으로 수천 줄의 "
    "로그가 반환될 수 있습니다 상한에 도달하면 오류가 발생하거나 모델이 잊기 시작합니다 "
    "그래서 오래된 내용을 요약하고 보관합니다 작업과 제약 조건은 유지합니다 서울 회사 "
    "오늘 내일 문제 해결 방법 테스트 데이터 서버 네트워크 파일을 읽고 확인해 주세요 감사합니다"
)

_EN_WORDS = _words(
    "the context window is finite and every tool result takes room as the conversation "
    "grows so older results are cleared archived first and a summary keeps the task its "
    "constraints decisions and next steps while the newest turn reaches the model whole "
    "a provider refuses a request that does not fit which costs a failed call and time"
)

_IDENTS = _words(
    "messages counter tokens result config window trigger summary archive thread_id "
    "tool_call_id self value items index parse_args load_file compact HttpClient "
    "getUserName MAX_RETRIES response payload buffer offset"
)

_DIRS = _words(
    "usr lib share local bin etc var log home runner work src tests node_modules site-packages "
    "python3.11 dist-packages include docs examples build target debug release .cache"
)

_EMOJI = "😀😂🥲😍🤔🙈🚀🔥✨🎉👍👎💡📦📁🐍🦀🌍🌧️⚠️✅❌🧪🛠️👩‍💻👨‍👩‍👧‍👦🏳️‍🌈🇨🇳🇯🇵🇺🇸👋🏽"
_COMBINING = [chr(c) for c in range(0x300, 0x36F)]
_CONTROL = ["\x1b[0m", "\x1b[1;31m", "\x1b[32m", "\x1b[2K", "\r", "\x07", "\x08", "\x1b[?25l"]


def _prose(rnd: random.Random, words: list[str], chars: int, sep: str, stops: str) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = sep.join(rnd.choice(words) for _ in range(rnd.randint(6, 18)))
        piece = sentence + rnd.choice(stops)
        out.append(piece)
        size += len(piece)
    return "".join(out)[:chars]


def chinese(rnd: random.Random, chars: int) -> str:
    return _prose(rnd, _ZH_WORDS, chars, "", "，。。；？！\n")


def japanese(rnd: random.Random, chars: int) -> str:
    return _prose(rnd, _JA_WORDS, chars, "", "、。。\n")


def korean(rnd: random.Random, chars: int) -> str:
    return _prose(rnd, _KO_WORDS, chars, " ", [". ", ", ", ".\n"][rnd.randint(0, 2)])


def english(rnd: random.Random, chars: int) -> str:
    return _prose(rnd, _EN_WORDS, chars, " ", ". ")


def code(rnd: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        depth = rnd.randint(0, 3)
        a, b, c = (rnd.choice(_IDENTS) for _ in range(3))
        line = "    " * depth + rnd.choice(
            [
                f"def {a}({b}, {c}=None):",
                f"{a} = {b}.get({c!r}, {rnd.randint(0, 999)})",
                f"if {a} is not None and len({b}) > {rnd.randint(1, 64)}:",
                f"return {{'{a}': {b}[{rnd.randint(0, 9)}], '{c}': {a}}}",
                f"for {a} in {b}.{c}():",
                f"# {' '.join(rnd.choice(_EN_WORDS) for _ in range(6))}",
                f'raise ValueError(f"{a} must be positive, got {{{b}!r}}")',
            ]
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def paths(rnd: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        parts = [rnd.choice(_DIRS) for _ in range(rnd.randint(2, 7))]
        name = rnd.choice(_IDENTS) + rnd.choice(["", "_", "-"]) + str(rnd.randint(0, 99))
        line = "/" + "/".join(parts) + "/" + name + rnd.choice([".txt", ".py", ".log", ".json"])
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def _value(rnd: random.Random, depth: int) -> object:
    pick = rnd.random()
    if depth > 2 or pick < 0.3:
        return rnd.randint(-10_000, 10_000)
    if pick < 0.55:
        return " ".join(rnd.choice(_EN_WORDS) for _ in range(rnd.randint(1, 5)))
    if pick < 0.65:
        return rnd.random() < 0.5
    if pick < 0.8:
        return [_value(rnd, depth + 1) for _ in range(rnd.randint(1, 4))]
    return {rnd.choice(_IDENTS): _value(rnd, depth + 1) for _ in range(rnd.randint(1, 4))}


def json_text(rnd: random.Random, chars: int) -> str:
    records = []
    size = 0
    while size < chars:
        record = {rnd.choice(_IDENTS): _value(rnd, 0) for _ in range(4)}
        records.append(record)
        size += len(json.dumps(record)) + 4
    indent = 2 if rnd.random() < 0.5 else None
    return json.dumps(records, indent=indent)[:chars]


def logs(rnd: random.Random, chars: int) -> str:
    lines: list[str] = []
    size = 0
    while size < chars:
        ts = f"2026-{rnd.randint(1, 12):02d}-{rnd.randint(1, 28):02d}T{rnd.randint(0, 23):02d}:"
        ts += f"{rnd.randint(0, 59):02d}:{rnd.randint(0, 59):02d}.{rnd.randint(0, 999):03d}Z"
        level = rnd.choice(["INFO", "DEBUG", "WARN", "ERROR"])
        req = "".join(rnd.choice("0123456789abcdef") for _ in range(12))
        words = " ".join(rnd.choice(_EN_WORDS) for _ in range(rnd.randint(3, 9)))
        line = (
            f"{ts} {level} [{rnd.choice(_IDENTS)}] req={req} {words} took={rnd.randint(1, 9999)}ms"
        )
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def base64_text(rnd: random.Random, chars: int) -> str:
    raw = base64.b64encode(rnd.randbytes(chars * 3 // 4 + 3)).decode()[:chars]
    if rnd.random() < 0.5:  # wrapped as MIME and PEM do
        return "\n".join(raw[i : i + 76] for i in range(0, len(raw), 76))[:chars]
    return raw


def emoji(rnd: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    symbols = list(_EMOJI)
    while size < chars:
        piece = rnd.choice(symbols) if rnd.random() < 0.85 else " " + rnd.choice(_EN_WORDS) + " "
        out.append(piece)
        size += len(piece)
    return "".join(out)[:chars]


def combining(rnd: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        base = rnd.choice(string.ascii_letters) if rnd.random() < 0.9 else " "
        marks = "".join(rnd.choice(_COMBINING) for _ in range(rnd.randint(1, 4)))
        out.append(base + marks)
        size += 1 + len(marks)
    return "".join(out)[:chars]


def control(rnd: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        piece = rnd.choice(_CONTROL) if rnd.random() < 0.6 else rnd.choice(_EN_WORDS) + " "
        if rnd.random() < 0.1:
            piece += f"exit code {rnd.randint(0, 255)}\n"
        out.append(piece)
        size += len(piece)
    return "".join(out)[:chars]


def nbsp_table(rnd: random.Random, chars: int) -> str:
    rows: list[str] = []
    size = 0
    while size < chars:
        cells = []
        for _ in range(rnd.randint(3, 6)):
            cell = rnd.choice([rnd.choice(_IDENTS), str(rnd.randint(0, 99_999))])
            cells.append(cell + "\u00a0" * rnd.randint(1, 24))
        row = "|".join(cells)
        rows.append(row)
        size += len(row) + 1
    return "\n".join(rows)[:chars]


def whitespace(rnd: random.Random, chars: int) -> str:
    """Whitespace-heavy output: columns aligned with spaces, tab-indented lines, trailing
    blanks, runs of blank lines, some with CRLF line ends."""
    lines: list[str] = []
    size = 0
    end = "\r\n" if rnd.random() < 0.3 else "\n"
    while size < chars:
        pick = rnd.random()
        if pick < 0.4:
            cells = [rnd.choice(_IDENTS).ljust(rnd.randint(12, 40)) for _ in range(3)]
            line = "".join(cells) + str(rnd.randint(0, 9999)).rjust(rnd.randint(6, 20))
        elif pick < 0.6:
            line = "\t" * rnd.randint(1, 6) + " ".join(rnd.choice(_EN_WORDS) for _ in range(4))
        elif pick < 0.8:
            line = rnd.choice(_EN_WORDS) + " " * rnd.randint(20, 200)
        else:
            line = end * rnd.randint(1, 40) + " " * rnd.randint(0, 8)
        lines.append(line)
        size += len(line) + len(end)
    return end.join(lines)[:chars]


def whitespace_runs(rnd: random.Random, chars: int) -> str:
    """A terminal screen as a capture tool returns it: short words between runs of mixed
    whitespace (spaces, tabs, line breaks, carriage returns, non-breaking spaces), as cursor
    movement and padding leave them."""
    out: list[str] = []
    size = 0
    while size < chars:
        run = "".join(rnd.choice(" \t\n\r\u00a0  ") for _ in range(rnd.randint(2, 60)))
        piece = run + (rnd.choice(_EN_WORDS) if rnd.random() < 0.5 else "")
        out.append(piece)
        size += len(piece)
    return "".join(out)[:chars]


_TREE = ["├── ", "│   ", "└── ", "    "]
_SYMBOLS = "→←↑↓⇒≤≥≠≈∑∏√∞∈∉∩∪⊂⊃±×÷°•·…–—‘’“”«»‹›€£¥₹§¶©®™✓✗★☆■□▪▫●○◆◇▲△▼▽"


def symbols(rnd: random.Random, chars: int) -> str:
    """Terminal and document output with non-ASCII symbols: a ``tree`` listing and a table
    (box drawing), arrows, math, quotes, currency, check marks, bullets."""
    lines: list[str] = []
    size = 0
    while size < chars:
        pick = rnd.random()
        if pick < 0.2:  # a table's rule and a row between bars, as rich and psql draw them
            widths = [rnd.randint(6, 30) for _ in range(rnd.randint(2, 5))]
            line = "┼".join("─" * w for w in widths) + "\n"
            line += "│".join(rnd.choice(_IDENTS).ljust(w)[:w] for w in widths)
        elif pick < 0.6:
            depth = rnd.randint(0, 3)
            line = "".join(rnd.choice(_TREE[:2]) for _ in range(depth)) + rnd.choice(_TREE[::2])
            line += rnd.choice(_IDENTS) + rnd.choice([".py", ".md", "/", ".json"])
        else:
            words = [rnd.choice(_EN_WORDS) for _ in range(rnd.randint(2, 6))]
            marks = [rnd.choice(_SYMBOLS) for _ in range(rnd.randint(1, 4))]
            line = " ".join(rnd.sample(words + marks, len(words) + len(marks)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)[:chars]


def symbol_blocks(rnd: random.Random, chars: int) -> str:
    """Random characters of the BMP's symbol blocks o200k has few tokens for (box drawing,
    arrows, math operators, geometric shapes, Braille, private use), in short runs."""
    blocks = [(0x2500, 0x257F), (0x2190, 0x21FF), (0x2200, 0x22FF), (0x25A0, 0x25FF),
              (0x2800, 0x28FF), (0xE000, 0xF8FF), (0x2010, 0x205E), (0x20A0, 0x20C0)]  # fmt: skip
    out: list[str] = []
    size = 0
    while size < chars:
        low, high = rnd.choice(blocks)
        piece = "".join(chr(rnd.randint(low, high)) for _ in range(rnd.randint(1, 12)))
        out.append(piece + rnd.choice(" \n"))
        size += len(out[-1])
    return "".join(out)[:chars]


GENERATORS: dict[str, Callable[[random.Random, int], str]] = {
    "chinese": chinese,
    "japanese": japanese,
    "korean": korean,
    "english": english,
    "code": code,
    "paths": paths,
    "json": json_text,
    "logs": logs,
    "base64": base64_text,
    "emoji": emoji,
    "combining": combining,
    "control": control,
    "nbsp_table": nbsp_table,
    "whitespace": whitespace,
    "whitespace_runs": whitespace_runs,
    "symbols": symbols,
    "symbol_blocks": symbol_blocks,
}


def sample(kind: str, seed: int, chars: int) -> str:
    """``chars`` characters of content class ``kind``, the same for the same seed."""
    return GENERATORS[kind](random.Random(f"{kind}:{seed}"), chars)


# ------------------------------------------------------------------ other scripts

_RU_WORDS = _words(
    "окно контекста конечно и каждый результат инструмента занимает место разговор растёт "
    "поэтому старые результаты очищаются сначала архивируются а краткое содержание сохраняет "
    "задачу её ограничения решения и следующие шаги пока новейший ход доходит до модели целиком "
    "провайдер отказывает в запросе который не помещается это стоит неудачного вызова и времени "
    "сервер база данных файл журнал ошибка пользователь запрос ответ проверка настройка Москва"
)
_EL_WORDS = _words(
    "το παράθυρο περιβάλλοντος είναι πεπερασμένο και κάθε αποτέλεσμα εργαλείου πιάνει χώρο "
    "καθώς η συζήτηση μεγαλώνει τα παλαιότερα αποτελέσματα καθαρίζονται αρχειοθετούνται πρώτα "
    "και μια περίληψη κρατά την εργασία τους περιορισμούς τις αποφάσεις και τα επόμενα βήματα "
    "ο πάροχος αρνείται ένα αίτημα που δεν χωράει διακομιστής αρχείο σφάλμα χρήστης Αθήνα"
)
_AR_WORDS = _words(
    "نافذة السياق محدودة وكل نتيجة أداة تأخذ مساحة مع نمو المحادثة تمسح النتائج القديمة "
    "بعد أرشفتها أولا ويحتفظ الملخص بالمهمة وقيودها وقراراتها والخطوات التالية بينما يصل "
    "أحدث دور إلى النموذج كاملا يرفض المزود طلبا لا يتسع الخادم قاعدة البيانات الملف السجل "
    "الخطأ المستخدم الطلب الاستجابة القاهرة"
)
_HE_WORDS = _words(
    "חלון ההקשר סופי וכל תוצאה של כלי תופסת מקום ככל שהשיחה גדלה התוצאות הישנות נמחקות "
    "אחרי שהן נשמרות בארכיון והסיכום שומר את המשימה את המגבלות את ההחלטות ואת הצעדים הבאים "
    "הספק מסרב לבקשה שאינה נכנסת שרת מסד נתונים קובץ יומן שגיאה משתמש בקשה תשובה ירושלים"
)
_HI_WORDS = _words(
    "संदर्भ विंडो सीमित है और हर टूल का परिणाम जगह लेता है जैसे जैसे बातचीत बढ़ती है पुराने "
    "परिणाम पहले संग्रहीत किए जाते हैं फिर हटाए जाते हैं और सारांश कार्य उसकी सीमाएं निर्णय "
    "और अगले कदम रखता है प्रदाता ऐसा अनुरोध अस्वीकार करता है जो फिट नहीं होता सर्वर फ़ाइल "
    "त्रुटि उपयोगकर्ता अनुरोध उत्तर दिल्ली"
)
_TH_WORDS = _words(
    "หน้าต่าง บริบท มี จำกัด และ ผลลัพธ์ ของ เครื่องมือ แต่ละ ครั้ง ใช้ พื้นที่ เมื่อ การสนทนา "
    "ยาวขึ้น ผลลัพธ์ เก่า จะ ถูก เก็บ ไว้ ก่อน แล้ว ล้าง ออก สรุป เก็บ งาน ข้อจำกัด การตัดสินใจ "
    "และ ขั้นตอน ถัดไป ผู้ให้บริการ ปฏิเสธ คำขอ ที่ ไม่ พอดี เซิร์ฟเวอร์ ไฟล์ ข้อผิดพลาด ผู้ใช้ กรุงเทพ"
)

#: Letters of each script, for random text: words of random letters, as a hostile page, a
#: transliteration table or an encoded blob in that script would have.
_ALPHABETS = {
    "cyrillic": "".join(chr(c) for c in range(0x410, 0x450)) + "ёЁ",
    "greek": "".join(chr(c) for c in range(0x391, 0x3CA) if c != 0x3A2),
    "arabic": "".join(chr(c) for c in range(0x621, 0x64B)),
    "hebrew": "".join(chr(c) for c in range(0x5D0, 0x5EB)),
    "thai": "".join(chr(c) for c in range(0xE01, 0xE3B)),
    "devanagari": "".join(chr(c) for c in range(0x905, 0x940)),
    # ASCII letters: a cipher's or a generated name's words are no English words (the
    # estimate priced every word of up to 12 letters at a token: random letters ran 0.18 to
    # 0.46 of o200k)
    "latin": string.ascii_lowercase,
    "capitals": string.ascii_uppercase,
    "letters": string.ascii_letters,
}


def cipher(rnd: random.Random, chars: int) -> str:
    """English in capitals, each letter shifted by a random key (a CTF's substitution
    cipher: English word lengths and spaces, no English words; 0.38 of o200k before)."""
    shift = rnd.randint(1, 25)
    text = english(rnd, chars).upper()
    return "".join(chr((ord(ch) - 65 + shift) % 26 + 65) if "A" <= ch <= "Z" else ch for ch in text)


def _script_prose(words: list[str], sep: str, stops: str) -> Callable[[random.Random, int], str]:
    def generate(rnd: random.Random, chars: int) -> str:
        return _prose(rnd, words, chars, sep, stops)

    return generate


def _random_letters(alphabet: str) -> Callable[[random.Random, int], str]:
    def generate(rnd: random.Random, chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            word = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 12)))
            piece = word + rnd.choice("     ,.\n")
            out.append(piece)
            size += len(piece)
        return "".join(out)[:chars]

    return generate


_MIXED_PARTS: list[Callable[[random.Random, int], str]] = []


def mixed(rnd: random.Random, chars: int) -> str:
    """Short runs of every class, one after another (a chat that switches languages, a log
    that quotes users, a page with emoji and code)."""
    out: list[str] = []
    size = 0
    while size < chars:
        piece = rnd.choice(_MIXED_PARTS)(rnd, rnd.randint(10, 200))
        out.append(piece + rnd.choice([" ", "\n", ": ", ""]))
        size += len(out[-1])
    return "".join(out)[:chars]


OTHER_SCRIPTS: dict[str, Callable[[random.Random, int], str]] = {
    "russian": _script_prose(_RU_WORDS, " ", ". "),
    "greek": _script_prose(_EL_WORDS, " ", ". "),
    "arabic": _script_prose(_AR_WORDS, " ", ". "),
    "hebrew": _script_prose(_HE_WORDS, " ", ". "),
    "hindi": _script_prose(_HI_WORDS, " ", "। "),
    "thai": _script_prose(_TH_WORDS, "", " "),
    **{f"{name}_random": _random_letters(letters) for name, letters in _ALPHABETS.items()},
    "cipher": cipher,
}
GENERATORS.update(OTHER_SCRIPTS)
_MIXED_PARTS.extend(g for k, g in GENERATORS.items() if not k.startswith("whitespace"))
GENERATORS["mixed"] = mixed
