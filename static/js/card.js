// card.js: the card's own behaviour (the edit form's live diff).
