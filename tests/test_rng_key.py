"""The privacy noise generator is keyed with the full 256 bits it is given (issue 21, bug 7).

``randomgen.ChaCha(seed=k)`` runs ``k`` through a SeedSequence whose pool is 128 bits, so the stated 256-bit key
would carry at most 128 bits of entropy; ``ChaCha(key=k)`` sets the cipher key itself."""

from __future__ import annotations

import numpy as np
import pytest

from privtext import rng as prng


def _key_of(gen: np.random.Generator) -> int:
    words = gen.bit_generator.state["state"]["keysetup"]  # eight little-endian uint32 words
    return sum(int(w) << (32 * i) for i, w in enumerate(words))


@pytest.mark.parametrize("key", [0, 1, 2**128 + 7, 2**255 + 12345, 2**256 - 1])
def test_the_key_reaches_the_cipher_state(key: int) -> None:
    assert _key_of(prng._chacha(key)) == key


def test_keys_that_differ_only_above_bit_128_give_different_streams() -> None:
    a = prng._chacha(5).random(4)
    b = prng._chacha(5 + 2**200).random(4)
    assert not np.array_equal(a, b)


def test_secure_rng_is_chacha20_keyed_with_256_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []
    real = prng._secrets.randbits

    def spy(k: int) -> int:
        drawn.append(k)
        return real(k)

    monkeypatch.setattr(prng._secrets, "randbits", spy)
    g = prng.secure_rng()
    assert drawn == [256]
    assert g.bit_generator.state["state"]["rounds"] == 20


@pytest.mark.parametrize("bad", [-1, 2**256])
def test_a_key_outside_256_bits_is_refused(bad: int) -> None:
    with pytest.raises(ValueError):
        prng._chacha(bad)
