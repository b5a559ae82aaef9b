"""How `curate init` reads a local file's text encoding: UTF-8 (or a byte-order mark) silently; a
legacy encoding only when its reading is the one unambiguous one, otherwise one line naming the
readings and asking for --encoding; the encoding used recorded and shown by `curate info`; a
file that is not UTF-8 told truly (how many lines are not). The files are written here, in the
encodings named, from questions written for these tests."""
from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from conftest import one_line_error, run_cli
from curate.core.errors import InputError
from curate.items.store import Workspace
from curate.core.textfiles import decode

HEADER = ["question", "A", "B", "C", "D", "answer"]
# ą ś ź (and Ą Ś Ź) are where ISO-8859-2 and cp1250 differ: read in cp1250, ISO-8859-2's ą, ś
# and ź are ±, ¶ and Ľ ("gę¶l± jaĽń").
POLISH = [
    ["Która rzeka przepływa przez Kraków?", "Wisła", "Odra", "Warta", "Bug", "A"],
    ["Dokończ: zażółć gęślą ...", "jaźń", "łódź", "kość", "gałąź", "A"],
    ["Ile nóg ma pająk?", "osiem", "sześć", "cztery", "dziesięć", "A"],
    ["Gdzie leży Śnieżka?", "w Karkonoszach", "w Tatrach", "w Bieszczadach", "na Mazurach", "A"],
    ["Co oznacza słowo źdźbło?", "łodyga trawy", "ziarno", "liść", "kwiat", "A"],
]
# Polish whose only letter where cp1250 and ISO-8859-2 differ is ą (no ś, no ź): cp1250's ą is
# ISO-8859-2's š, so a cp1250 "są" reads "sš" in ISO-8859-2, letters both: nothing tells them apart.
POLISH_AMBIGUOUS = [
    ["Czy one są w domu?", "tak", "nie", "może", "nigdy", "A"],
    ["Czy statki płyną?", "do portu", "na plażę", "w góry", "pod most", "A"],
    ["Które zdanie jest poprawne?", "Oni mają psa", "Oni ma psa", "Oni mam psa", "Oni masz psa", "A"],
]
JAPANESE = [
    ["日本の首都はどこですか", "東京", "大阪", "京都", "名古屋", "A"],
    ["富士山の高さは何メートルですか", "三七七六", "千", "二千", "五千", "A"],
    ["光合成で植物が作る気体はどれですか", "酸素", "窒素", "二酸化炭素", "水素", "A"],
    ["日本で一番長い川はどれですか", "信濃川", "利根川", "石狩川", "北上川", "A"],
]
FRENCH = [["Où est la gare?", "ici", "là-bas", "à côté", "très loin", "B"],
          ["Qu'a mangé le garçon à Noël?", "une crème brûlée", "une pomme", "du pain", "rien", "A"]]
# English whose only characters above ASCII are typographic apostrophes: cp1252 writes ’ as 0x92,
# which Mac Roman reads as í ("didnít"); Mac Roman writes it as 0xD5, which cp850 reads as ı
# ("didnıt"). Letters both, but no English word has one there.
ENGLISH = [["Why didn’t the sister’s car start?", "the battery", "the fuel", "the tyres", "the key", "A"],
           ["Which of these is a noun?", "it’s", "house", "run", "quickly", "B"],
           ["What’s the capital of France?", "Paris", "Rome", "Berlin", "Madrid", "A"]]
# Spanish in Mac Roman: its í (0x92) is cp1252's ’, so cp1252 reads "país" as "pa’s", an English
# possessive; the text is not English, so that decides nothing (á, é and ú garble cp1252).
SPANISH = [["Qué río pasa por Sevilla?", "el Guadalquivir", "el Tajo", "el Ebro", "el Duero", "A"],
           ["Cuántos días tiene un año?", "trescientos sesenta y cinco", "cien", "mil", "doce", "A"],
           ["En qué país está Lima?", "en el Perú", "en Chile", "en Bolivia", "en Ecuador", "A"],
           ["Quién es el tío de María?", "el hermano de su padre", "su primo", "su abuelo", "su hijo", "A"]]


def csv_text(rows) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([HEADER, *rows])
    return out.getvalue()


def write(path, rows, encoding):
    path.write_bytes(csv_text(rows).encode(encoding))
    return path


def init(tmp_path, data, *extra, check=True):
    return run_cli("init", tmp_path / "ws", "--benchmark", "generic", "--data", data, "--question", "question",
                   "--choices", "A,B,C,D", "--answer", "answer", *extra, check=check)


def stored(ws):
    with Workspace.open(ws) as w:
        return [[it["context_parts"]["question"], *it["options"]] for it in w.items()], w.meta("source")["encoding"]


def test_polish_iso_8859_2_is_read_as_such_not_as_cp1250(tmp_path):
    """The reported bug: a Polish ISO-8859-2 CSV was stored read as cp1250 (ą ś ź as ± ¶ Ľ), with
    no word. Its cp1250 reading puts symbols inside words; the ISO-8859-2 one is clean."""
    data = write(tmp_path / "pl.csv", POLISH, "iso8859_2")
    assert "gę¶l±" in data.read_bytes().decode("cp1250")
    for extra in ((), ("--encoding", "iso-8859-2")):  # detected, and named
        ws = tmp_path / "ws"
        init(tmp_path, data, *extra)
        assert stored(ws) == ([r[:5] for r in POLISH], "iso8859-2")
        assert "encoding    iso8859-2" in run_cli("info", ws).stdout
        shutil.rmtree(ws)


def test_ambiguous_polish_is_refused_naming_the_readings_then_read_as_named(tmp_path):
    data = write(tmp_path / "pl.csv", POLISH_AMBIGUOUS, "cp1250")
    error = one_line_error(init(tmp_path, data, check=False), "pl.csv", "cp1250 'są'", "iso8859_2 'sš'",
                           "name the right one with --encoding")
    assert "line 2" in error
    assert not (tmp_path / "ws").exists()
    init(tmp_path, data, "--encoding", "cp1250")
    assert stored(tmp_path / "ws") == ([r[:5] for r in POLISH_AMBIGUOUS], "cp1250")
    assert "encoding    cp1250" in run_cli("info", tmp_path / "ws").stdout


def test_shift_jis_is_read_not_refused_with_a_false_message(tmp_path):
    """Shift-JIS bytes hold UTF-8-looking pairs (の is 82 cc); the file was refused as "line 2
    is not valid UTF-8, though the rest of the file is" when no line of it is."""
    data = write(tmp_path / "ja.csv", JAPANESE, "shift_jis")
    init(tmp_path, data)
    assert stored(tmp_path / "ws") == ([r[:5] for r in JAPANESE], "shift_jis")


def test_a_file_mixing_utf8_and_other_lines_is_told_truly(tmp_path):
    """UTF-8 lines and Shift-JIS lines in one file: refused (a guess would garble one or the
    other), naming the first bad line and how many others there are."""
    text = csv_text(JAPANESE).splitlines(keepends=True)
    raw = text[0].encode() + text[1].encode() + b"".join(line.encode("shift_jis") for line in text[2:])
    data = tmp_path / "mixed.csv"
    data.write_bytes(raw)
    error = one_line_error(init(tmp_path, data, check=False), "mixed.csv", "line 3 is not valid UTF-8",
                           "nor are 2 other lines (4, 5)", "1 lines hold UTF-8 text", "--encoding")
    assert "the rest of the file is" not in error


def test_a_json_lines_file_not_utf8_is_told_truly(tmp_path):
    data = tmp_path / "ja.jsonl"
    lines = [json.dumps({"question": r[0], "A": r[1], "B": r[2], "C": r[3], "D": r[4], "answer": r[5]},
                        ensure_ascii=False) + "\n" for r in JAPANESE]
    data.write_bytes("".join(lines).encode("shift_jis"))
    one_line_error(init(tmp_path, data, check=False), "ja.jsonl", "line 1 is not valid UTF-8",
                   "nor are 3 other lines (2, 3, 4); the file is not UTF-8", "--encoding (it reads as text in shift_jis)")
    init(tmp_path, data, "--encoding", "shift_jis")
    assert stored(tmp_path / "ws") == ([r[:5] for r in JAPANESE], "shift_jis")
    assert "encoding    shift_jis" in run_cli("info", tmp_path / "ws").stdout


def test_utf16_with_a_byte_order_mark_is_read(tmp_path):
    data = tmp_path / "pl.csv"
    data.write_bytes(csv_text(POLISH).encode("utf-16"))
    init(tmp_path, data)
    assert stored(tmp_path / "ws") == ([r[:5] for r in POLISH], "utf-16")


@pytest.mark.parametrize("rows,encoding,expected", [
    (POLISH, "cp1250", "cp1250"),
    (POLISH, "iso8859_2", "iso8859-2"),
    ([["Které město je hlavním městem České republiky?", "Praha", "Brno", "Plzeň", "Ostrava", "A"],
      ["Příliš žluťoučký kůň úpěl ďábelské ódy.", "ano", "ne", "možná", "nikdy", "A"]], "iso8859_2", "iso8859-2"),
    ([["Welche Straße führt zum Bahnhof?", "links", "rechts", "geradeaus", "zurück", "A"],
      ["Wie heißt die größte Stadt Österreichs?", "Wien", "Graz", "Linz", "Salzburg", "A"]], "latin_1", "cp1252"),
    ([["Какая река самая длинная в Европе?", "Волга", "Дунай", "Днепр", "Урал", "A"]], "cp1251", "cp1251"),
    ([["Какая река самая длинная в Европе?", "Волга", "Дунай", "Днепр", "Урал", "A"]], "koi8_r", "koi8-r"),
    ([["Ποια είναι η πρωτεύουσα της Ελλάδας;", "Αθήνα", "Σπάρτη", "Θήβα", "Κόρινθος", "A"]], "cp1253", "cp1253"),
    (JAPANESE, "shift_jis", "shift_jis"),
    (JAPANESE, "euc_jp", "euc_jp"),
    ([["中国的首都是哪里？", "北京。", "上海。", "广州。", "深圳。", "A"],
      ["蜘蛛有几条腿？", "八条。", "六条。", "四条。", "十条。", "A"],
      ["谁写了红楼梦？", "曹雪芹。", "鲁迅。", "老舍。", "巴金。", "A"]], "gb18030", "gb18030"),
    (ENGLISH, "cp1252", "cp1252"),
    (ENGLISH, "mac_roman", "mac-roman"),
    (SPANISH, "mac_roman", "mac-roman"),
])
def test_an_unambiguous_legacy_file_is_read(rows, encoding, expected):
    assert decode(csv_text(rows).encode(encoding), "f.csv") == (csv_text(rows), expected)


@pytest.mark.parametrize("rows,encoding,readings", [
    (POLISH_AMBIGUOUS, "cp1250", ["cp1250", "iso8859_2"]),
    # Czech without ť: cp1250's ě č ř ů read in cp1252 are letters too (ì è ø ù).
    ([["Které město je hlavním městem České republiky?", "Praha", "Brno", "Plzeň", "Ostrava", "A"]], "cp1250",
     ["cp1250", "cp1252"]),
    # French in Latin-1: è à ù read in cp1250 are č ŕ ů, letters as plausible.
    (FRENCH, "latin_1", ["cp1252", "cp1250"]),
])
def test_an_ambiguous_legacy_file_is_refused_naming_its_readings(rows, encoding, readings):
    with pytest.raises(InputError) as caught:
        decode(csv_text(rows).encode(encoding), "f.csv")
    message = str(caught.value)
    assert message.startswith("f.csv: is not UTF-8, and reads as text in") and "--encoding" in message
    assert all(f"{name} '" in message for name in readings), message


def test_a_legacy_file_with_control_characters_in_every_reading_is_refused():
    raw = csv_text(POLISH).encode("cp1250").replace(b"Odra", b"O\x00dra")
    with pytest.raises(InputError, match="line 2 is not valid UTF-8 .* the file is not UTF-8; fix the file"):
        decode(raw, "f.csv")
