#include "engine/demo_corpus.hpp"

namespace tessera::engine {

namespace {

// Written for Tessera; not taken from any book. Varied on purpose: narrative,
// instructions, dialogue, numbers and a little technical prose, so the
// merges cover common English words and their capitalised forms.
constexpr std::string_view corpus = R"(The harbour town woke slowly on the first morning of the spring market.
Fishermen pulled their boats onto the shingle, and the smell of salt and
tar drifted up the narrow streets where the bakers were already at work.
By seven o'clock the square was full of carts, and by nine there was hardly
room to walk between the stalls that sold apples, cheese, rope, lanterns and
bright wool from the hill farms.

Mara had come down from the valley with her brother, who carried a basket of
honey jars on his back. "Don't drop them," she said, for the third time.
"I won't," he answered. "I never have." She laughed, because that was not
true, and he knew it. Last year he had dropped two jars at the bridge, and
the dog that followed them home had been sticky for a week.

They found a place near the fountain, between a woman selling bread and an
old man who mended clocks. The clock mender worked without looking up. He
had a small brass tool in one hand and a glass in his eye, and every so often
he would hold a tiny wheel against the light and whisper to it, as if the
wheel could tell him what was wrong.

How to make a simple loaf of bread:
1. Mix 500 grams of flour with 10 grams of salt and 7 grams of dried yeast.
2. Add 320 millilitres of warm water and stir until the dough comes together.
3. Knead the dough for ten minutes, until it is smooth and springs back.
4. Leave it in a warm place for about an hour, until it has doubled in size.
5. Shape it, let it rise again for 45 minutes, then bake it at 220 degrees
   for 30 to 35 minutes. It is done when the base sounds hollow when tapped.

Weather report for the coast: winds from the south west, force 4 to 5,
increasing 6 later. Rain at times, then showers. Visibility moderate or good,
occasionally poor. Sea state slight or moderate. Temperatures between 9 and
14 degrees during the day, falling to 6 overnight.

In the afternoon a storyteller arrived and stood on the edge of the fountain.
She told the story of a lighthouse keeper who lived alone on a rock far out
at sea. Every night he climbed the hundred and twelve steps to light the
lamp, and every morning he climbed them again to put it out. One winter a
ship came through the fog, and its captain saw the light just in time. The
next summer the captain returned with a gift: a small red bird in a cage.
The keeper opened the cage and let the bird fly, and it stayed with him for
the rest of his life, singing on the rail outside his window.

The children asked what the bird was called. "It never told him its name,"
said the storyteller, "so he never told it his." Everyone thought about
that for a moment, and then the bread woman started to clap.

Computers store text as numbers. Each letter, digit or symbol is given a
code, and a sequence of codes is written as a sequence of bytes. A language
model does not read letters one at a time; it reads tokens, which are
common pieces of words. The word "the" is usually one token, while a rare
word may be split into several smaller parts. Training a tokenizer means
counting which pairs of pieces appear most often and joining them, again and
again, until the vocabulary has the size that was asked for.

Questions people often ask:
What time does the market open? It opens at 7:30 and closes at 18:00.
Where can I leave my bicycle? There is a rack behind the town hall.
Is there a bus back to the valley? Yes, the last one leaves at 19:15.
Can I pay with a card? Most stalls take cards, but some only take cash.

When the sun went down, the stall holders packed their things away. Mara
counted the money twice and found they had sold forty one jars, more than
ever before. Her brother carried the empty basket home, swinging it as he
walked, and for once he did not drop anything at all. Behind them the lamps
were being lit along the harbour wall, one after another, and far out at sea
a single light turned slowly in the dark.

Some plain facts, for the record: water boils at 100 degrees Celsius at sea
level; a year has 365 days, or 366 in a leap year; light from the sun takes
about eight minutes to reach the earth; the heart of an adult beats between
60 and 100 times a minute when resting. None of these facts will change
because we would like them to, which is one of the things that makes them
useful.

Dear Sam, thank you for your letter and for the photographs of the new house.
The garden looks wonderful, and I can see why you are so pleased with the
kitchen. We hope to visit in June, if the trains are running again by then.
Please give our love to everyone, and tell Alex that the book he lent me was
excellent. I will bring it back when we come. With best wishes, Jo.
)";

} // namespace

std::string_view demo_corpus() { return corpus; }

} // namespace tessera::engine
