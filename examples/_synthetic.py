"""The synthetic two-topic corpus that the text examples train on (shared by them; not an example).

A document's label is its topic; some of its sentences carry a word of that
topic, a few a word of the other one, the rest is filler.
"""

TOPICS = {
    0: "goal match team score coach league player season win stadium".split(),
    1: "market stock price bank trade profit invest share fund rate".split(),
}
FILLER = [f"w{i}" for i in range(150)]


def topic_sentence(rng, label):
    """One sentence of a document of topic ``label``, as a list of 3..11 words (``rng``: a ``random.Random``)."""
    words = [rng.choice(FILLER) for _ in range(rng.randint(3, 12))]
    if rng.random() < 0.5:  # some sentences carry the topic
        words[rng.randrange(len(words))] = rng.choice(TOPICS[label])
    if rng.random() < 0.1:  # and a little noise from the other topic
        words[rng.randrange(len(words))] = rng.choice(TOPICS[1 - label])
    return words
