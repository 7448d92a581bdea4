// inbox.js: the approvers' inbox (keyboard shortcuts, selection count).
