/**
 * The fixture's templates: how a fact is said (the user's quote) and how it is asked about.
 * Paraphrase questions share no content word with the fact or its quote (fixture.test.ts checks).
 */
import type { EntityType } from "./fixture";

export interface EventTemplate {
  predicate: string;
  values: string[];
  quote: (value: string) => string;
  when: (value: string) => string;
  entityType?: EntityType;
}

export const TRIP: EventTemplate = {
  predicate: "traveled_to",
  values: [],
  quote: (v) => `I just got back from a trip to ${v}`,
  when: (v) => `When did I go to ${v}?`,
  entityType: "PLACE",
};
export const TRIP_PLACES = [
  "Japan",
  "Iceland",
  "Mexico",
  "Vietnam",
  "Morocco",
  "Peru",
  "Norway",
  "Greece",
  "Kenya",
  "Chile",
  "Scotland",
  "Croatia",
];

export const EVENTS: EventTemplate[] = [
  {
    predicate: "ran_race",
    values: ["the Berlin half marathon", "a trail 10k", "the city marathon"],
    quote: (v) => `I ran ${v}`,
    when: (v) => `When did I run ${v}?`,
    entityType: "EVENT",
  },
  {
    predicate: "adopted_pet",
    values: ["a cat named Miso", "a puppy named Pepper", "a rabbit named Clover"],
    quote: (v) => `we adopted ${v}`,
    when: (v) => `When did we adopt ${v}?`,
  },
  {
    predicate: "got_promoted_to",
    values: ["team lead", "senior specialist", "head of department"],
    quote: (v) => `I got promoted to ${v}`,
    when: () => "When was I promoted?",
  },
  {
    predicate: "attended_wedding_of",
    values: ["my college roommate", "my cousin Dara", "two old colleagues"],
    quote: (v) => `I went to the wedding of ${v}`,
    when: () => "When did I go to a wedding?",
  },
  {
    predicate: "broke_bone",
    values: ["my left wrist", "a toe", "my collarbone"],
    quote: (v) => `I broke ${v} falling off my bike`,
    when: () => "When did I break a bone?",
  },
  {
    predicate: "bought_car",
    values: ["a used Volvo estate", "an electric Kia", "a red Mini"],
    quote: (v) => `I finally bought ${v}`,
    when: () => "When did I buy a car?",
    entityType: "PRODUCT",
  },
  {
    predicate: "started_learning",
    values: ["Japanese", "the piano", "Italian"],
    quote: (v) => `I started learning ${v}`,
    when: (v) => `When did I start learning ${v}?`,
  },
  {
    predicate: "saw_concert_of",
    values: ["Radiohead", "Taylor Swift", "the Berlin Philharmonic"],
    quote: (v) => `I saw ${v} live`,
    when: (v) => `When did I see ${v} in concert?`,
    entityType: "EVENT",
  },
  {
    predicate: "completed_course",
    values: ["a pottery course", "a first aid course", "a sailing course"],
    quote: (v) => `I completed ${v}`,
    when: (v) => `When did I finish ${v}?`,
  },
  {
    predicate: "had_surgery",
    values: ["knee surgery", "an appendectomy", "laser eye surgery"],
    quote: (v) => `I had ${v}`,
    when: () => "When was my operation?",
  },
  {
    predicate: "moved_office_to",
    values: ["the new riverside building", "a co-working space", "the third floor"],
    quote: (v) => `our team moved to ${v}`,
    when: () => "When did our team change offices?",
  },
  {
    predicate: "got_engaged_in",
    values: ["Paris", "the mountains", "our kitchen"],
    quote: (v) => `we got engaged in ${v}`,
    when: () => "When did I get engaged?",
  },
  {
    predicate: "won_award",
    values: ["an employee of the year award", "a photography prize", "a hackathon"],
    quote: (v) => `I won ${v}`,
    when: () => "When did I win something?",
  },
  {
    predicate: "volunteered_at",
    values: ["a food bank", "an animal shelter", "a beach clean-up"],
    quote: (v) => `I volunteered at ${v}`,
    when: () => "When did I volunteer?",
  },
];

export interface PreferenceTemplate {
  predicate: string;
  values: string[];
  quote: (value: string) => string;
  /** No content word in common with the predicate, the values or the quote. */
  paraphrase: string;
  direct: string;
}

export const PREFERENCES: PreferenceTemplate[] = [
  {
    predicate: "allergic_to",
    values: ["peanuts", "shellfish", "sesame"],
    quote: (v) => `I'm allergic to ${v}`,
    paraphrase: "Is there anything I must never eat?",
    direct: "What am I allergic to?",
  },
  {
    predicate: "plays_instrument",
    values: ["the cello", "the trumpet", "the violin"],
    quote: (v) => `I play ${v} in a community orchestra`,
    paraphrase: "What kind of music do I make myself?",
    direct: "Which instrument do I play?",
  },
  {
    predicate: "follows_diet",
    values: ["vegetarian", "vegan", "pescatarian"],
    quote: (v) => `I'm ${v} these days`,
    paraphrase: "Which foods should a restaurant keep off my plate?",
    direct: "What diet do I follow?",
  },
  {
    predicate: "has_dog_named",
    values: ["Biscuit", "Luna", "Rocco"],
    quote: (v) => `our dog ${v} is getting old`,
    paraphrase: "Which animal shares my home?",
    direct: "What is my dog called?",
  },
  {
    predicate: "speaks_language",
    values: ["Portuguese", "German", "Mandarin"],
    quote: (v) => `I speak ${v} fluently`,
    paraphrase: "Apart from English, how could someone talk with me?",
    direct: "Which languages do I speak?",
  },
  {
    predicate: "plays_sport",
    values: ["tennis", "squash", "badminton"],
    quote: (v) => `I play ${v} every Saturday`,
    paraphrase: "How do I stay active at weekends?",
    direct: "Which sport do I play?",
  },
  {
    predicate: "afraid_of",
    values: ["heights", "deep water", "spiders"],
    quote: (v) => `I'm terrified of ${v}`,
    paraphrase: "What scares me?",
    direct: "What am I afraid of?",
  },
  {
    predicate: "favourite_cuisine",
    values: ["Thai", "Ethiopian", "Georgian"],
    quote: (v) => `${v} food is my favourite`,
    paraphrase: "Which kind of cooking do I love most?",
    direct: "What is my favourite cuisine?",
  },
  {
    predicate: "drinks_coffee",
    values: ["black", "with oat milk", "as a double espresso"],
    quote: (v) => `I drink my coffee ${v}`,
    paraphrase: "How do I take my morning brew?",
    direct: "How do I drink coffee?",
  },
  {
    predicate: "bedtime",
    values: ["around 11pm", "before 10pm", "after midnight"],
    quote: (v) => `I usually go to bed ${v}`,
    paraphrase: "At what hour do I turn in at night?",
    direct: "What time do I go to bed?",
  },
  {
    predicate: "hobby_craft",
    values: ["knitting scarves", "woodworking", "making candles"],
    quote: (v) => `in the evenings I'm ${v}`,
    paraphrase: "What do I like doing with my hands?",
    direct: "What craft hobby do I have?",
  },
  {
    predicate: "reads_genre",
    values: ["science fiction", "crime novels", "history books"],
    quote: (v) => `I mostly read ${v}`,
    paraphrase: "What should a bookshop recommend to me?",
    direct: "What do I read?",
  },
  {
    predicate: "supports_team",
    values: ["Arsenal", "Benfica", "the Chicago Bulls"],
    quote: (v) => `I'm a huge ${v} supporter`,
    paraphrase: "Which club do I cheer on?",
    direct: "Which team do I support?",
  },
  {
    predicate: "commutes_by",
    values: ["bicycle", "tram", "e-scooter"],
    quote: (v) => `I commute by ${v}`,
    paraphrase: "How do I get to the office each morning?",
    direct: "How do I commute?",
  },
  {
    predicate: "has_children",
    values: ["two daughters", "a son", "three kids"],
    quote: (v) => `I have ${v}`,
    paraphrase: "Am I a parent?",
    direct: "How many children do I have?",
  },
  {
    predicate: "grows_on_balcony",
    values: ["tomatoes", "chillies", "basil"],
    quote: (v) => `I grow ${v} on my balcony`,
    paraphrase: "Do I do any gardening at home?",
    direct: "What do I grow?",
  },
  {
    predicate: "wears",
    values: ["glasses", "contact lenses"],
    quote: (v) => `I'm short-sighted and wear ${v}`,
    paraphrase: "Do I have trouble with my eyesight?",
    direct: "Do I wear glasses?",
  },
  {
    predicate: "intolerant_to",
    values: ["lactose", "gluten"],
    quote: (v) => `I can't digest ${v}`,
    paraphrase: "Which ingredients upset my stomach?",
    direct: "What am I intolerant to?",
  },
];

export interface FillerTemplate {
  predicate: string;
  values: string[];
  quote: (value: string) => string;
  question: string;
}

export const FILLERS: FillerTemplate[] = [
  {
    predicate: "likes_band",
    values: ["Arctic Monkeys", "Fleetwood Mac", "Daft Punk", "Khruangbin", "ABBA", "Massive Attack", "Bon Iver"],
    quote: (v) => `I've been listening to ${v} a lot`,
    question: "Which bands do I listen to?",
  },
  {
    predicate: "owns_board_game",
    values: ["Catan", "Ticket to Ride", "Wingspan", "Carcassonne", "Azul", "Pandemic", "Codenames"],
    quote: (v) => `we bought ${v} for game nights`,
    question: "Which board games do we have?",
  },
  {
    predicate: "watched_series",
    values: ["The Bear", "Severance", "Dark", "Succession", "Fleabag", "Slow Horses", "Shogun"],
    quote: (v) => `I binged ${v} over the weekend`,
    question: "What TV series did I binge?",
  },
  {
    predicate: "likes_snack",
    values: ["salted almonds", "dark chocolate", "rice crackers", "dried mango", "popcorn", "olives"],
    quote: (v) => `I keep snacking on ${v}`,
    question: "What snacks do I eat?",
  },
  {
    predicate: "uses_app",
    values: ["Duolingo", "Strava", "Notion", "Headspace", "Todoist", "Komoot"],
    quote: (v) => `I use ${v} every day`,
    question: "Which apps do I use daily?",
  },
  {
    predicate: "visits_cafe",
    values: ["Cafe Lume", "the Corner Bakery", "Bean There", "Kaffeehaus Mitte", "Blue Door Coffee"],
    quote: (v) => `my favourite spot for working is ${v}`,
    question: "Where do I like to work from?",
  },
  {
    predicate: "wants_to_buy",
    values: ["a standing desk", "noise-cancelling headphones", "a road bike", "a new sofa", "an air fryer"],
    quote: (v) => `I've been saving up for ${v}`,
    question: "What am I saving up for?",
  },
  {
    predicate: "cooks_dish",
    values: ["shakshuka", "mushroom risotto", "dal tadka", "pad thai", "lasagne", "ramen from scratch"],
    quote: (v) => `my signature dish is ${v}`,
    question: "What do I cook?",
  },
  {
    predicate: "listens_to_podcast",
    values: ["Hardcore History", "99% Invisible", "Radiolab", "The Daily", "Freakonomics"],
    quote: (v) => `on my walks I listen to ${v}`,
    question: "Which podcasts do I listen to?",
  },
  {
    predicate: "dislikes",
    values: ["cilantro", "crowded trains", "horror films", "early meetings", "cold showers"],
    quote: (v) => `I really can't stand ${v}`,
    question: "What do I dislike?",
  },
  {
    predicate: "collects",
    values: ["vinyl records", "vintage postcards", "fountain pens", "enamel pins", "old maps"],
    quote: (v) => `I collect ${v}`,
    question: "What do I collect?",
  },
  {
    predicate: "plans_to_visit",
    values: ["Patagonia", "the Faroe Islands", "Kyoto", "Zanzibar", "the Dolomites"],
    quote: (v) => `one day I want to see ${v}`,
    question: "Where do I dream of going?",
  },
];
